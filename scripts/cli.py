"""The `trainstack` console script: ops/cli.py's commands plus the entry points above its layer."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ops import cli


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
STATUS, REPORT = cli.lazy("supervisor.status", "command"), cli.lazy("report.entry", "command")
BUDGET = cli.on_account("scripts/team-budget", cli.lazy("report.team_budget", "main"))
TEST = cli.lazy("harness.lanes", "main")  # ops/ never does
BENCH, EMULATOR = (cli.lazy("bench.cli", f) for f in ("bench", "emulator"))
COMMANDS = (
    cli.Passthrough("test", "set up, then the static checks and the suite in its lanes", TEST),
    *(cli.Passthrough(name, summary, _on_stack(name, m, f)) for name, summary, m, f in ON_STACK),
    cli.Passthrough("status", "every stack: state, nodes, $/h, spent, the supervisor's heartbeat", STATUS),
    cli.Passthrough("preview-report", "preview stacks and print the Markdown report", REPORT),
    cli.Passthrough("team-budget", "a pull request's team budget check", BUDGET),
    cli.Passthrough("bench", "benchmark against the local RunPod; writes docs/PERFORMANCE.md", BENCH),
    cli.Passthrough("bench-emulator", "the local RunPod's RSS and requests/s (JSON)", EMULATOR),
)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
