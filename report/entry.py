"""`trainstack preview-report`: the report's command on the one command line (scripts/cli.py), its target
decided once before any read, the local RunPod's workspaces found alone."""

from __future__ import annotations

import os
from collections.abc import Sequence

from common import pulumi
from ops import cli, workflow
from ops.workflow import BAD_USE, say


def command(argv: Sequence[str]) -> int:
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
