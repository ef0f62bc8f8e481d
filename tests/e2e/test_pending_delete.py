"""A pending delete of the checkpoint bucket against an S3 endpoint that is gone never wedges the stack
(issue 25): `up` stops with a message naming scripts/recover, recover forgets it, the next `up` converges,
and the live bucket of the same name is never deleted through today's endpoint.

The state is the one an older trainstack left when a new endpoint made it replace the bucket (create at the
new endpoint, delete at the old one) and the old endpoint then disappeared: the live bucket, plus a pending
delete of the same URN whose recorded endpoint no longer answers."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import boto3
import pytest

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO, run_killing_tree
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e
BUCKET = "trainstack-search-checkpoints"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_pending_delete_at_a_dead_endpoint_is_recovered(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("search", tmp_path, runpod, moto_s3)
    run.up()
    exported = json.loads(run.cli.run("stack", "export", "--stack", "search").stdout)
    resources = exported["deployment"]["resources"]
    at = next(i for i, r in enumerate(resources) if r["type"].endswith("s3:CheckpointBucket"))
    stale = copy.deepcopy(resources[at])
    stale["delete"] = True
    stale["outputs"]["endpoint_url"] = f"http://127.0.0.1:{_closed_port()}"
    resources.insert(at + 1, stale)
    state_file = tmp_path / "wedged.json"
    state_file.write_text(json.dumps(exported))
    run.cli.run("stack", "import", "--file", str(state_file), "--stack", "search")

    wedged = run.up(check=False)
    assert wedged.returncode != 0
    assert "scripts/recover" in wedged.stdout + wedged.stderr

    recover = [str(REPO / "scripts/recover"), "search", "--yes", "--cwd", str(run.cli.project)]
    done = run_killing_tree(recover, 300, env=run.cli.env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "forgot the pending delete of bucket" in done.stderr

    run.up("--expect-no-changes")
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    assert s3.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200  # the live one stays
    orphaned, duplicated = orphans(run), duplicates(runpod)
    assert orphaned == [] and duplicated == []
    report.record(
        "pending delete of the bucket at an S3 endpoint that is gone (state left by an older version)",
        "up stopped naming scripts/recover; recover forgot it; next up converged; live bucket kept",
        orphaned,
        duplicated,
        runs=3,
    )
    run.destroy()
