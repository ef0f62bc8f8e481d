"""Prod guards: `protect` from trainstack:protect holds against destroy; the bucket's force_destroy advice is
applicable; an endpoint-only change is an update of the bucket, never a replace (issues 24.10 and 25)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import Report, duplicates, live_ids, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e
BUCKET = "trainstack-prod-checkpoints"


def test_protect_holds_and_force_destroy_is_applicable(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("prod", tmp_path, runpod, moto_s3)
    run.cli.run("config", "set", "--stack", "prod", "trainstack:protect", "true")  # as committed
    run.up()
    live = set(live_ids(runpod))

    # The same moto, spelt another way: only how the bucket is reached changes.
    other_spelling = moto_s3.replace("127.0.0.1", "localhost")
    run.cli.run("config", "set", "--stack", "prod", "trainstack:s3EndpointUrl", other_spelling)
    preview = json.loads(run.preview("--json").stdout)
    ops = {s["urn"].rsplit("::", 1)[1]: s["op"] for s in preview["steps"] if s["op"] != "same"}
    assert ops.get("prod-checkpoints") == "update", ops
    assert "replace" not in ops.values() and "create-replacement" not in ops.values(), ops
    run.cli.run("config", "rm", "--stack", "prod", "trainstack:s3EndpointUrl")

    refused = run.cli.run("destroy", "--yes", "--stack", "prod", check=False)
    assert refused.returncode != 0
    assert "protected" in refused.stdout + refused.stderr
    assert set(live_ids(runpod)) >= {i for i in live if i}, "a protected resource was deleted"

    # Taking prod down on purpose, with checkpoints in the bucket: what the messages say to do.
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    run.cli.run("config", "set", "--stack", "prod", "trainstack:protect", "false")
    run.cli.run("config", "set", "--path", "--stack", "prod", "trainstack:bucket.force_destroy", "true")
    run.up()
    _put_checkpoint(moto_s3)
    run.destroy()
    assert live_ids(runpod) == {}
    assert BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    report.record(
        "protect: `pulumi destroy` of prod with trainstack:protect true",
        "refused, nothing deleted; after protect false + force_destroy true and an up, destroy removed all",
        orphans(run),
        duplicates(runpod),
        runs=3,
    )


def _put_checkpoint(endpoint: str) -> None:
    """A checkpoint object, over TLS-less moto: the bucket policy denies plain HTTP, so drop it first the
    way an operator with admin rights would, then write the object."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.delete_bucket_policy(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="prod/step-100.pt", Body=b"weights")
