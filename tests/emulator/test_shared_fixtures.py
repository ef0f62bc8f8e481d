"""The session fixtures other parts use: a real-time local RunPod and a moto S3 server."""

from __future__ import annotations

import time

import boto3
import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import pod_body
from tests.polling import scaled

pytestmark = pytest.mark.services


def wait_ready(api: httpx.Client, pod_id: str, deadline_s: float) -> dict[str, object]:
    """Ready means RUNNING with runtime and the SSH port mapped (RunPod can report RUNNING before `runtime`
    is set), within a deadline."""
    deadline = time.monotonic() + scaled(deadline_s)
    while time.monotonic() < deadline:
        pod: dict[str, object] = api.get(f"/v2/pods/{pod_id}").json()
        if pod["status"] == "RUNNING" and pod["runtime"]:
            return pod
        time.sleep(0.05)
    raise AssertionError(f"pod {pod_id} not ready after {deadline_s} s")


def test_local_runpod_pods_get_ready_in_real_time(local_runpod: LocalRunPod) -> None:
    assert local_runpod.env()["RUNPOD_API_URL"] == local_runpod.base_url
    with local_runpod.client() as api:
        pod_id = api.post("/v2/pods", json=pod_body("fixture-check")).json()["id"]
        try:
            assert wait_ready(api, pod_id, deadline_s=10)["ssh"]
        finally:
            assert api.delete(f"/v2/pods/{pod_id}").status_code == 204
    assert local_runpod.admin.live()["pods"] == []


def test_moto_s3_serves_buckets(moto_s3: str) -> None:
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="trainstack-checkpoints")
    s3.put_object(Bucket="trainstack-checkpoints", Key="step-1/model.pt", Body=b"weights")
    assert s3.get_object(Bucket="trainstack-checkpoints", Key="step-1/model.pt")["Body"].read() == b"weights"
    s3.delete_object(Bucket="trainstack-checkpoints", Key="step-1/model.pt")
    s3.delete_bucket(Bucket="trainstack-checkpoints")
