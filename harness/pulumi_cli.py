"""Run the Pulumi CLI that scripts/bootstrap built, offline, on an isolated local backend."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.cachedir import cache_dir
from common.process import descendants as descendants  # tests read the tree through the harness
from common.process import kill_tree
from common.stack import Stack

REPO = Path(__file__).resolve().parents[1]


def pinned_version() -> str:
    """The Pulumi version tools/pulumi/go.mod pins (the one place it is written)."""
    for line in (REPO / "tools/pulumi/go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["github.com/pulumi/pulumi/pkg/v3"]:
            return parts[1]
    raise AssertionError("tools/pulumi/go.mod does not pin github.com/pulumi/pulumi/pkg/v3")


def run_killing_tree(argv: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run(..., capture_output=True, text=True), but a timeout kills the whole tree, plugins too,
    before TimeoutExpired is raised (subprocess.run kills only the CLI and leaves its plugins orphaned)."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            stdout, stderr = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr) from None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


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
            PULUMI_CONFIG_PASSPHRASE="test-only-passphrase",  # noqa: S106 (local test stacks only)
            PULUMI_SKIP_UPDATE_CHECK="true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
            PULUMI_CREDENTIAL_STORE="plaintext",
            PULUMI_RUNTIME_VIRTUALENV=str(REPO / ".venv"),
        )
        env.update(self.extra_env)
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        (self.state / "backend").mkdir(parents=True, exist_ok=True)
        done = self.stack().cli(*args, timeout=timeout, workdir=self.project)
        proc = subprocess.CompletedProcess(list(args), done.code, done.output, done.errors)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def stack_init(self, stack: str, secrets_provider: str | None = None) -> None:
        """`pulumi stack init`; `secrets_provider` (a URL, harness/kms.py) instead of the passphrase."""
        extra = ["--secrets-provider", secrets_provider] if secrets_provider else []
        self.run("stack", "init", stack, *extra)

    def stack(self, name: str = "") -> Stack:
        """The client for stack `name` of this project and backend ('': the selected one)."""
        (self.state / "backend").mkdir(parents=True, exist_ok=True)
        return Stack(name, self.project, env=self.env(), timeout=600, tree=True)

    def export(self, stack: str = "") -> dict[str, Any]:
        return dict(self.stack(stack).export().exported)

    def resources(self) -> list[dict[str, Any]]:
        return list(self.export()["deployment"].get("resources") or [])
