"""The commands that run every round or every few seconds load no Pulumi SDK (issue #47).

`scripts/supervise` runs once a round on every stack and `scripts/watch` every refresh; neither drives the
engine in-process (the supervisor acts through the `pulumi` CLI). `import pulumi` is ~0.15 CPU-s of gRPC,
protobuf and OpenTelemetry: it came in through `components.delivery`, for one path helper, which now lives in
providers/settings.py beside the setting it reads. One fresh interpreter, so no other test's imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys

from harness.pulumi_cli import REPO

HEAVY = ("pulumi", "grpc", "boto3")
COMMANDS = ("supervisor.cli", "watch.cli", "stackview.sources")


def test_the_supervisor_and_watch_import_no_pulumi_grpc_or_boto3() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {COMMANDS!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == [], f"{COMMANDS} load {done.stdout.strip()} at import"
