"""A crash right after the checkpoint bucket is created recovers: the next `up` adopts the bucket this stack
created (its owner tag matches) and converges; a stranger's bucket of that name is refused (issue 24.2).

The crash is reproduced exactly at its consequence: the bucket exists in S3, created and tagged by the
provider, and the state does not hold it (`pulumi state delete` of the bucket and what depends on it,
which is what a kill between CreateBucket and the engine's state write leaves)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e
BUCKET = "trainstack-search-checkpoints"


def test_up_after_a_crash_after_the_bucket_adopts_it(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("search", tmp_path, runpod, moto_s3)
    run.up()
    (bucket,) = [r for r in run.cli.resources() if r["type"].endswith("s3:CheckpointBucket")]
    run.cli.run("state", "delete", bucket["urn"], "--target-dependents", "--yes", "--stack", "search")
    assert not [r for r in run.cli.resources() if r["type"].endswith("s3:CheckpointBucket")]
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=BUCKET)["TagSet"]}
    assert tags["trainstack:owner"].endswith("/search"), tags

    run.up()  # before: "bucket ... already exists; choose another bucket_name" on every later up
    run.up("--expect-no-changes")
    orphaned, duplicated = orphans(run), duplicates(runpod)
    assert orphaned == [] and duplicated == []
    report.record(
        "crash after bucket: the state lost the bucket just created (and the pods after it)",
        "next up adopted the bucket by its owner tag and the pods by name; converged",
        orphaned,
        duplicated,
        runs=2,
    )

    # Another stack claiming the same bucket name is refused, and the bucket is left as it was.
    other = open_stack("search", tmp_path / "other", runpod, moto_s3)
    other.cli.run("stack", "rename", "search-2", "--stack", "search")
    refused = other.cli.run("up", "--yes", "--stack", "search-2", *other.policy_args(), check=False)
    assert refused.returncode != 0
    assert "is not this stack's" in refused.stdout + refused.stderr
    assert s3.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200
    other.cli.run("destroy", "--yes", "--stack", "search-2")
    run.destroy()
