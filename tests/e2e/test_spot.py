"""Spot where RunPod still offers it: a preempted pod shows in refresh, `up` brings the capacity back, and
the node's start script resumes from the newest checkpoint in the bucket."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.components.test_start_script import Node
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e
POD = "pulumi-python:dynamic/runpod:Pod"


@pytest.fixture(scope="module")
def spot_runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    server = start_local_runpod(
        tmp_path_factory.mktemp("spot-runpod"),
        *FAST_ARGS,
        "--graphql",
        "on",
        "--offer-spot",
        "--preempt-notice-s",
        "0.2",
    )
    yield server
    server.stop()


def _pods(run: StackRun) -> dict[str, dict[str, object]]:
    return {r["urn"].rsplit("::", 1)[1]: r["outputs"] for r in run.cli.resources() if r["type"] == POD}


def _wait_status(runpod: LocalRunPod, pod_id: str, status: str) -> None:
    deadline = time.monotonic() + 30
    while not any(p["id"] == pod_id and p["status"] == status for p in runpod.admin.live()["pods"]):
        assert time.monotonic() < deadline, f"pod {pod_id} never reached {status}"
        runpod.admin.advance(0.0)  # let the emulator apply what is due (the notice running out)
        time.sleep(0.05)  # polling the emulator, not timing the test


def test_preempted_spot_pod_is_seen_and_replaced(
    tmp_path: Path, spot_runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    run = open_stack("search", tmp_path, spot_runpod, moto_s3)
    run.up()
    pods = _pods(run)
    assert {p["capacity_obtained"] for p in pods.values()} == {"spot"}  # capacity: auto got spot
    victim = str(pods["search-pod-0"]["pod_id"])

    spot_runpod.admin.preempt(victim)
    _wait_status(spot_runpod, victim, "EXITED")
    run.refresh()
    assert _pods(run)["search-pod-0"]["status"] == "EXITED"  # refresh reports the preemption

    run.up()
    after = _pods(run)["search-pod-0"]
    assert after["pod_id"] != victim and after["status"] == "RUNNING"
    run.up("--expect-no-changes")
    orphaned, duplicated = orphans(run), duplicates(spot_runpod)
    report.record(
        "spot: pod preempted, refresh, up", "refresh saw EXITED; up rented it again", orphaned, duplicated
    )
    assert orphaned == [] and duplicated == []
    run.destroy()
    assert orphans(run) == []


def test_resume_fetches_the_newest_checkpoint_from_the_bucket(tmp_path: Path, moto_s3: str) -> None:
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="resume-check")
    for step in (100, 300, 200):  # uploaded out of order: newest is by step, not by upload time
        s3.put_object(Bucket="resume-check", Key=f"run-1/step-{step:08d}.pt", Body=f"state {step}".encode())
    node = Node(tmp_path, "search", 0)
    code, out = node.run(
        TRAINSTACK_DRY_RUN="0",
        TRAINSTACK_CHECKPOINT_BUCKET="resume-check",
        TRAINSTACK_CHECKPOINT_PREFIX="run-1/",
        TRAINSTACK_PYTHON=sys.executable,
        AWS_ENDPOINT_URL_S3=moto_s3,
        AWS_ACCESS_KEY_ID=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        AWS_SECRET_ACCESS_KEY=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert code == 0, out
    assert "fetched step-00000300.pt from the bucket" in out
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-00000300.pt"]
    assert (tmp_path / "ckpt" / "step-00000300.pt").read_text() == "state 300"
