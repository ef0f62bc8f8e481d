"""Issue #45: the preview's AWS policy (ops/iam/preview-policy.json) lets a preview read the state and the
checkpoint bucket, and refuses every write, the state lock's too (a preview takes none): moto with IAM
enforced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import enable_iam_authentication

from ops.iam_policy import PolicyError, checkpoint_buckets, preview_policy, state_location
from providers import settings
from providers.s3.bucket import BucketError, CheckpointBucketProvider

STATE, CHECKPOINTS, REGION = "team-state", "trainstack-dev-checkpoints", "us-east-1"
BACKEND = f"s3://{STATE}/trainstack"
STATE_KEY = "trainstack/.pulumi/stacks/trainstack/dev.json"
LOCK_KEY = "trainstack/.pulumi/locks/organization/trainstack/dev/1b2c.json"
ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def _user(iam: Any, name: str, policy: dict[str, Any]) -> dict[str, str]:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {"aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}


@pytest.fixture
def s3s(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """(admin's S3 client, the preview user's), in an account where IAM decides every call once the admin
    user exists (made with moto's default credentials, which IAM does not know)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        admin_keys = _user(boto3.client("iam"), "admin", ADMIN)
        with enable_iam_authentication():
            yield from _accounts(admin_keys)


def _accounts(admin_keys: dict[str, str]) -> Iterator[tuple[Any, Any]]:
    iam = boto3.client("iam", **admin_keys)
    preview_keys = _user(iam, "preview", preview_policy(BACKEND, [CHECKPOINTS]))
    admin = boto3.client("s3", region_name=REGION, **admin_keys)
    for bucket in (STATE, CHECKPOINTS):
        admin.create_bucket(Bucket=bucket)
    admin.put_object(Bucket=STATE, Key=STATE_KEY, Body=b"{}")
    admin.put_bucket_versioning(Bucket=CHECKPOINTS, VersioningConfiguration={"Status": "Enabled"})
    yield admin, boto3.client("s3", region_name=REGION, **preview_keys)


def denied(call: Any, **kwargs: Any) -> bool:
    try:
        call(**kwargs)
    except ClientError as exc:
        return exc.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


def test_the_preview_reads_the_state_and_the_bucket(s3s: tuple[Any, Any]) -> None:
    _, preview = s3s
    keys = [o["Key"] for o in preview.list_objects_v2(Bucket=STATE, Prefix="trainstack/.pulumi/")["Contents"]]
    assert keys == [STATE_KEY]
    assert preview.get_object(Bucket=STATE, Key=STATE_KEY)["Body"].read() == b"{}"
    assert preview.get_bucket_versioning(Bucket=CHECKPOINTS)["Status"] == "Enabled"
    assert preview.list_objects_v2(Bucket=CHECKPOINTS)["KeyCount"] == 0


def test_the_preview_cannot_write_anything_else(s3s: tuple[Any, Any]) -> None:
    admin, preview = s3s
    assert denied(preview.put_object, Bucket=STATE, Key=STATE_KEY, Body=b"tampered")
    assert denied(preview.delete_object, Bucket=STATE, Key=STATE_KEY)
    assert denied(preview.put_object, Bucket=CHECKPOINTS, Key="trainstack/dev/step-1.pt", Body=b"x")
    assert denied(preview.create_bucket, Bucket="trainstack-evil-checkpoints")
    assert denied(preview.delete_bucket, Bucket=CHECKPOINTS)
    assert denied(
        preview.put_bucket_versioning, Bucket=CHECKPOINTS, VersioningConfiguration={"Status": "Suspended"}
    )
    assert denied(preview.put_object, Bucket=STATE, Key=LOCK_KEY, Body=b"{}")  # no lock planted ...
    admin.put_object(Bucket=STATE, Key=LOCK_KEY, Body=b"{}")
    assert denied(preview.delete_object, Bucket=STATE, Key=LOCK_KEY)  # ... and a deploy's never removed
    assert admin.get_object(Bucket=STATE, Key=STATE_KEY)["Body"].read() == b"{}"  # the state is untouched
    assert admin.get_bucket_versioning(Bucket=CHECKPOINTS)["Status"] == "Enabled"


def test_the_document_names_every_stack_bucket_and_only_s3_backends() -> None:
    assert state_location("s3://b") == ("b", "") and state_location("s3://b/p/q/") == ("b", "p/q/")
    with pytest.raises(PolicyError, match="s3://"):
        state_location("file:///tmp/state")
    buckets = checkpoint_buckets()
    assert CHECKPOINTS in buckets
    text = json.dumps(preview_policy(BACKEND, buckets))
    assert "${" not in text and all(f"arn:aws:s3:::{b}" in text for b in buckets)
    actions = {a for s in json.loads(text)["Statement"] for a in s["Action"]}
    assert not [a for a in actions if a.split(":")[1].startswith(("Put", "Delete", "Create", "Restore"))]


def test_an_up_with_the_preview_keys_creates_no_bucket_and_says_why(s3s: tuple[Any, Any]) -> None:
    admin, preview = s3s
    provider = CheckpointBucketProvider(client_factory=lambda _args: preview)
    checked = provider.check({}, {"bucket_name": "trainstack-search-checkpoints"})
    with pytest.raises(
        BucketError, match="AccessDenied; if these are the preview's keys, a preview never writes"
    ):
        provider.create(checked.inputs)
    assert "trainstack-search-checkpoints" not in {b["Name"] for b in admin.list_buckets()["Buckets"]}


def test_a_read_only_process_refuses_bucket_writes_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSTACK_READ_ONLY", "1")
    settings.reset()
    try:
        provider = CheckpointBucketProvider(client_factory=lambda _args: pytest.fail("S3 was called"))
        checked = provider.check({}, {"bucket_name": "trainstack-search-checkpoints"})
        with pytest.raises(BucketError, match=r"a preview never writes.*TRAINSTACK_READ_ONLY=1"):
            provider.create(checked.inputs)
    finally:
        monkeypatch.delenv("TRAINSTACK_READ_ONLY")
        settings.reset()
