"""The commands that run every round or every few seconds load no more than they use (issue #47).

`scripts/supervise` runs once a round on every stack and `scripts/watch` every refresh; neither drives the
engine in-process (the supervisor acts through the `pulumi` CLI). `import pulumi` is ~0.15 CPU-s of gRPC,
protobuf and OpenTelemetry: it came in through `components.delivery`, for one path helper, which now lives in
providers/settings.py beside the setting it reads. And `scripts/trainstack` itself, before it knows the
command, loaded the bench, the team budget's models, the orphan check's and the demo's (httpx, pydantic):
0.45 CPU-s for `scripts/local-runpod env`, 0.17 now. One fresh interpreter per check, so no other test's
imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys

from harness.pulumi_cli import REPO

HEAVY = ("pulumi", "grpc", "boto3")
COMMANDS = ("supervisor.cli", "watch.cli", "stackview.sources")


def _loaded(modules: tuple[str, ...], heavy: tuple[str, ...]) -> list[str]:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


def test_the_supervisor_and_watch_import_no_pulumi_grpc_or_boto3() -> None:
    assert _loaded(COMMANDS, HEAVY) == []


def test_the_command_line_loads_no_command_before_it_runs() -> None:
    """`scripts/trainstack`'s dispatcher: what `local-runpod env`, `up --help` and the like pay before their
    own code runs."""
    heavy = (*HEAVY, "httpx", "pydantic", "bench.cli", "report.team_budget", "ops.orphans", "ops.local_demo")
    assert _loaded(("scripts.cli",), heavy) == []
