"""Issue #45: the preview's AWS policy under the real engine: `pulumi preview` on an S3 state backend in a
moto server that enforces IAM passes with the preview user's keys, which can write nothing (Pulumi's DIY
backend takes no lock for a preview: ops/iam_policy.py), and leaves the state as it was. The backend is
what is tested, so the program is one output; the policy's every action is tested in process
(tests/ops/test_iam_policy.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from harness.local import start_moto_s3
from harness.pulumi_cli import REPO
from ops.iam_policy import preview_policy

pytestmark = pytest.mark.e2e

STATE = "team-state"
BACKEND = f"s3://{STATE}/trainstack"
ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
PROGRAM = "import pulumi\npulumi.export('n', pulumi.Config().get_int('n') or 1)\n"


def _user(iam: Any, name: str, policy: dict[str, Any]) -> tuple[str, str]:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def test_preview_with_the_preview_keys_passes_on_an_iam_enforced_s3_backend(tmp_path: Path) -> None:
    server = start_moto_s3(tmp_path / "moto.log")
    try:
        url = server.endpoint_url
        region = {"endpoint_url": url, "region_name": "us-east-1"}
        moto_default = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", **region}
        admin = _user(boto3.client("iam", **moto_default), "admin", ADMIN)
        assert httpx.post(f"{url}/moto-api/reset-auth", content=b"0").status_code == 200  # IAM decides now
        as_admin = {"aws_access_key_id": admin[0], "aws_secret_access_key": admin[1], **region}
        preview = _user(boto3.client("iam", **as_admin), "preview", preview_policy(BACKEND, []))
        s3 = boto3.client("s3", **as_admin)
        s3.create_bucket(Bucket=STATE)

        project = tmp_path / "project"
        project.mkdir()
        venv = REPO / ".venv"
        (project / "Pulumi.yaml").write_text(
            f"name: trainstack\nruntime:\n  name: python\n  options:\n    virtualenv: {venv}\n"
        )
        (project / "__main__.py").write_text(PROGRAM)
        env = {
            **os.environ,
            "PULUMI_BACKEND_URL": f"{BACKEND}?endpoint={url}&region=us-east-1&use_path_style=true",
            "PULUMI_CONFIG_PASSPHRASE": "local",
            "PULUMI_HOME": str(tmp_path / "home"),
        }

        def pulumi(keys: tuple[str, str], *args: str) -> subprocess.CompletedProcess[str]:
            keyed = env | {"AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1]}
            return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project, env=keyed,
                                  capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

        assert pulumi(admin, "stack", "init", "dev").returncode == 0
        assert pulumi(admin, "config", "set", "n", "2", "--stack", "dev").returncode == 0
        state_key = "trainstack/.pulumi/stacks/trainstack/dev.json"
        before = s3.get_object(Bucket=STATE, Key=state_key)["Body"].read()

        seen = pulumi(preview, "preview", "--stack", "dev")
        assert seen.returncode == 0, seen.stderr[-2000:]
        assert "n" in seen.stdout and "2" in seen.stdout
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=STATE).get("Contents", [])]
        assert not [k for k in keys if "/locks/" in k]  # nothing written, no lock either
        assert s3.get_object(Bucket=STATE, Key=state_key)["Body"].read() == before
    finally:
        server.stop()
