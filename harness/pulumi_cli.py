"""Run the Pulumi CLI that scripts/bootstrap built, offline, on an isolated local backend."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import pulumi
from common.cachedir import cache_dir

REPO = Path(__file__).resolve().parents[1]


def pinned_version() -> str:
    """The Pulumi version tools/pulumi/go.mod pins (the one place it is written)."""
    for line in (REPO / "tools/pulumi/go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["github.com/pulumi/pulumi/pkg/v3"]:
            return parts[1]
    raise AssertionError("tools/pulumi/go.mod does not pin github.com/pulumi/pulumi/pkg/v3")


def descendants(root: int) -> set[int]:
    """`root` and every process below it, read from /proc (Linux)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found


def kill_tree(root: int) -> None:
    """SIGKILL a process, its process group and every descendant.

    Pulumi starts its plugins (language host, providers) in process groups of their own, so killing the
    CLI's group alone would leave a provider running on after the CLI."""
    doomed = descendants(root)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, signal.SIGKILL)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


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
        proc = run_killing_tree(pulumi.command(args), timeout, cwd=self.project, env=self.env())
        if check and proc.returncode != 0:
            raise AssertionError(
                f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def stack_init(self, stack: str, secrets_provider: str | None = None) -> None:
        """`pulumi stack init`; `secrets_provider` (a URL, harness/kms.py) instead of the passphrase."""
        extra = ["--secrets-provider", secrets_provider] if secrets_provider else []
        self.run("stack", "init", stack, *extra)

    def export(self) -> dict[str, Any]:
        return json.loads(self.run("stack", "export").stdout)  # type: ignore[no-any-return]

    def resources(self) -> list[dict[str, Any]]:
        return list(self.export()["deployment"].get("resources") or [])
