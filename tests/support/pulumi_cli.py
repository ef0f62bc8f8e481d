"""Run the Pulumi CLI that scripts/bootstrap built, offline, on an isolated local backend."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from providers.cachedir import cache_dir

REPO = Path(__file__).resolve().parents[2]


def pinned_version() -> str:
    """The Pulumi version tools/pulumi/go.mod pins (the one place it is written)."""
    for line in (REPO / "tools/pulumi/go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["github.com/pulumi/pulumi/pkg/v3"]:
            return parts[1]
    raise AssertionError("tools/pulumi/go.mod does not pin github.com/pulumi/pulumi/pkg/v3")


@dataclass
class Pulumi:
    """A Pulumi CLI bound to one project directory and one throwaway file backend."""

    project: Path
    state: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PATH=f"{cache_dir() / 'bin'}:{REPO / '.venv/bin'}:{env.get('PATH', '')}",
            PULUMI_HOME=str(self.state / "home"),
            PULUMI_BACKEND_URL=f"file://{self.state / 'backend'}",
            PULUMI_CONFIG_PASSPHRASE="test-only-passphrase",
            PULUMI_SKIP_UPDATE_CHECK="true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
            PULUMI_CREDENTIAL_STORE="plaintext",
            PULUMI_RUNTIME_VIRTUALENV=str(REPO / ".venv"),
        )
        env.update(self.extra_env)
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        (self.state / "backend").mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.project,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def stack_init(self, stack: str) -> None:
        self.run("stack", "init", stack)

    def export(self) -> dict[str, Any]:
        return json.loads(self.run("stack", "export").stdout)  # type: ignore[no-any-return]

    def resources(self) -> list[dict[str, Any]]:
        return list(self.export()["deployment"].get("resources") or [])
