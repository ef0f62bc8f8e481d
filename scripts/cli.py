"""The `trainstack` console script: ops/cli.py's commands plus the entry points above its layer."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence

from common import pulumi
from ops import cli, workflow
from ops.workflow import BAD_USE, say


def _report(argv: Sequence[str]) -> int:
    from report.cli import main

    if cli.wants_help(argv) or main(["--names-only", *argv]) != 0:  # every STACK checked before a path
        return main(["--help"]) if cli.wants_help(argv) else BAD_USE
    target = workflow.decided_target("preview-report")  # before any read (ops/workspace.py)
    os.environ.update(pulumi.environment())
    explicit = any(a.split("=")[0] in ("--cwd", "--recorded") for a in argv)
    if explicit or not target.local:
        return main(argv)
    workflow.use_local_runpod("preview-report")
    say("preview-report", f"targeting the local RunPod at {os.environ['RUNPOD_API_URL']}")
    return main(["--local", *argv])


def _status(argv: Sequence[str]) -> int:
    """Every stack of the project, each found in its own workspace as watch finds one (never started)."""
    from pathlib import Path

    from supervisor.status import main

    if cli.wants_help(argv):
        return main(["--help"])

    def workspace_of(stack: str) -> Path | str:
        said = io.StringIO()  # its "not up here" line goes into the stack's row, not above the listing
        with contextlib.redirect_stderr(said):
            found = cli.found_workspace("scripts/status", stack, None, required=False)
        return found if isinstance(found, Path) else said.getvalue().strip().split(": ", 1)[-1]

    return main(argv, workspace_of=workspace_of)


def _on_stack(name: str, module: str, function: str) -> cli.Main:
    """A command about a live stack (`NAME STACK ...`): its workspace found first (ops/cli.py)."""
    main = cli.stack_command(f"scripts/{name}", cli.lazy(module, function), required=name != "supervise")
    return lambda argv: main(argv)


ON_STACK = (  # name, summary, module and function of its main
    ("watch", "a live stack's nodes, steps and money", "watch.cli", "main"),
    ("logs", "a node's start-script log or training progress, tailed or followed", "stackview.reach", "logs"),
    ("ssh", "a shell or one command on any node of a live stack", "stackview.reach", "ssh"),
    ("supervise", "release a run's compute when it finished, failed or idles", "supervisor.cli", "main"),
)
BUDGET = cli.on_account("scripts/team-budget", cli.lazy("report.team_budget", "main"))
TEST = cli.lazy("harness.lanes", "main")  # ops/ never does
BENCH, EMULATOR = (cli.lazy("bench.cli", f) for f in ("bench", "emulator"))
COMMANDS = (
    cli.Passthrough("test", "set up, then the static checks and the suite in its lanes", TEST),
    *(cli.Passthrough(name, summary, _on_stack(name, m, f)) for name, summary, m, f in ON_STACK),
    cli.Passthrough("status", "every stack: state, nodes, $/h, spent, the supervisor's heartbeat", _status),
    cli.Passthrough("preview-report", "preview stacks and print the Markdown report", _report),
    cli.Passthrough("team-budget", "a pull request's team budget check", BUDGET),
    cli.Passthrough("bench", "benchmark against the local RunPod; writes docs/PERFORMANCE.md", BENCH),
    cli.Passthrough("bench-emulator", "the local RunPod's RSS and requests/s (JSON)", EMULATOR),
)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
