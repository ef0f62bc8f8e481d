"""scripts/local-runpod: start (idempotent) prints the env, status and env work, stop stops both; its moto
is the demo's S3: HTTPS with a certificate the env names, where the checkpoint bucket's TLS-only policy lets
checkpoints through."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import boto3
import httpx
import pytest

from providers.s3.client import tls_only_policy

pytestmark = pytest.mark.services

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local-runpod"


def run(state: Path, verb: str) -> subprocess.CompletedProcess[str]:
    # Control-plane only: emulated hosts (and moto on their bridge) are tests/hosts' business.
    env = os.environ | {"TRAINSTACK_STATE_DIR": str(state), "LOCAL_RUNPOD_ARGS": "--hosts off"}
    return subprocess.run(
        [str(SCRIPT), verb], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def exports(text: str) -> dict[str, str]:
    pairs = (
        line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export ")
    )
    return dict(pairs)


def test_start_status_env_stop(tmp_path: Path) -> None:
    try:
        started = run(tmp_path, "start")
        assert started.returncode == 0, started.stderr
        env = exports(started.stdout)
        assert env["AWS_ACCESS_KEY_ID"] == "testing" and env["RUNPOD_API_KEY"] == "local-runpod-key"
        assert exports(run(tmp_path, "start").stdout) == env  # idempotent: same servers
        assert run(tmp_path, "status").returncode == 0
        assert exports(run(tmp_path, "env").stdout) == env
        headers = {"Authorization": f"Bearer {env['RUNPOD_API_KEY']}"}
        assert httpx.get(f"{env['RUNPOD_API_URL']}/v2/pods", headers=headers).status_code == 200
        assert env["AWS_ENDPOINT_URL_S3"].startswith("https://")
        ca = env["AWS_CA_BUNDLE"]
        assert (
            httpx.get(
                f"{env['AWS_ENDPOINT_URL_S3']}/", verify=ssl.create_default_context(cafile=ca)
            ).status_code
            == 200
        )
        _a_checkpoint_lands_under_the_tls_only_policy(env)
    finally:
        assert run(tmp_path, "stop").returncode == 0
    assert run(tmp_path, "status").returncode == 3
    assert run(tmp_path, "stop").returncode == 0  # idempotent


def _a_checkpoint_lands_under_the_tls_only_policy(env: dict[str, str]) -> None:
    """What a node's `bucket sync` does against the demo's S3, with the policy the provider puts on every
    checkpoint bucket (providers/s3/client.py), unchanged: the upload that failed with 403 before."""
    s3 = boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL_S3"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        verify=env["AWS_CA_BUNDLE"],
    )
    s3.create_bucket(Bucket="demo-ckpt")
    s3.put_bucket_policy(Bucket="demo-ckpt", Policy=tls_only_policy("demo-ckpt"))
    s3.put_object(Bucket="demo-ckpt", Key="trainstack/dev/step-10.pt", Body=b"weights")
    assert s3.get_object(Bucket="demo-ckpt", Key="trainstack/dev/step-10.pt")["Body"].read() == b"weights"
    assert "aws:SecureTransport" in s3.get_bucket_policy(Bucket="demo-ckpt")["Policy"]
