"""`s3:CheckpointBucket` under in-process moto: every hardening setting, and a delete that loses nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from providers.s3.bucket import BucketError, CheckpointBucketProvider


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with mock_aws():
        yield boto3.client("s3", region_name="us-east-1")


def _create(provider: CheckpointBucketProvider, **over: Any) -> dict[str, Any]:
    checked = provider.check({}, {"bucket_name": "trainstack-ckpt", **over})
    assert checked.failures == []
    created = provider.create(checked.inputs)
    return created.outs or {}


def test_create_applies_every_hardening_setting(s3: Any) -> None:
    outs = _create(CheckpointBucketProvider())
    name = "trainstack-ckpt"
    assert outs["arn"] == f"arn:aws:s3:::{name}"
    assert s3.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
    rule = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    assert block == dict.fromkeys(
        ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"), True
    )
    statement = json.loads(s3.get_bucket_policy(Bucket=name)["Policy"])["Statement"][0]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]}
    assert rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 30
    assert rules["archive-aged-checkpoints"]["Transitions"][0]["StorageClass"] == "GLACIER_IR"
    assert rules["abort-incomplete-multipart"]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 7


def test_kms_key_switches_to_sse_kms(s3: Any) -> None:
    _create(CheckpointBucketProvider(), kms_key_id="arn:aws:kms:us-east-1:123456789012:key/abc")
    rule = s3.get_bucket_encryption(Bucket="trainstack-ckpt")["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert rule["ApplyServerSideEncryptionByDefault"]["KMSMasterKeyID"].endswith("key/abc")


def test_check_names_bad_fields(s3: Any) -> None:
    result = CheckpointBucketProvider().check(
        {}, {"bucket_name": "Bad_Name", "lifecycle": {"archive_after_days": 0}}
    )
    assert {f.property for f in result.failures} == {"bucket_name", "lifecycle.archive_after_days"}


def test_delete_refuses_a_non_empty_bucket_unless_force_destroy(s3: Any) -> None:
    provider = CheckpointBucketProvider()
    outs = _create(provider, tls_only=False)  # moto enforces the TLS-only Deny against its plain client
    s3.put_object(Bucket="trainstack-ckpt", Key="step-100/model.pt", Body=b"weights")
    with pytest.raises(BucketError, match=r"config set --path trainstack:bucket\.force_destroy "):
        provider.delete("trainstack-ckpt", outs)
    assert s3.get_object(Bucket="trainstack-ckpt", Key="step-100/model.pt")["Body"].read() == b"weights"
    s3.delete_object(Bucket="trainstack-ckpt", Key="step-100/model.pt")  # only a delete marker + version left
    with pytest.raises(BucketError):
        provider.delete("trainstack-ckpt", outs)
    provider.delete("trainstack-ckpt", {**outs, "force_destroy": True})
    assert s3.list_buckets()["Buckets"] == []
    provider.delete("trainstack-ckpt", outs)  # already gone: succeeds
    assert provider.read("trainstack-ckpt", outs).id is None


def test_read_reports_drift_and_update_repairs_it(s3: Any) -> None:
    provider = CheckpointBucketProvider()
    outs = _create(provider)
    s3.delete_bucket_policy(Bucket="trainstack-ckpt")
    refreshed = provider.read("trainstack-ckpt", outs).outs or {}
    assert refreshed["tls_only"] is False
    checked = provider.check({}, {"bucket_name": "trainstack-ckpt"}).inputs
    diff = provider.diff("trainstack-ckpt", refreshed, checked)
    assert diff.changes and diff.replaces == []
    provider.update("trainstack-ckpt", refreshed, checked)
    assert "SecureTransport" in s3.get_bucket_policy(Bucket="trainstack-ckpt")["Policy"]


def test_existing_bucket_is_not_adopted(s3: Any) -> None:
    s3.create_bucket(Bucket="trainstack-ckpt")
    with pytest.raises(BucketError, match="already exists and is not this stack's"):
        _create(CheckpointBucketProvider())


OWNER = "organization/trainstack/prod"


def _tags(s3: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket="trainstack-ckpt")["TagSet"]}


def test_a_bucket_this_stack_created_is_adopted_after_a_crash(s3: Any) -> None:
    # Issue 24.2: `up` killed after CreateBucket, before the state write. The bucket carries the owner tag
    # put right after CreateBucket; the next create finds it, adopts it and finishes its hardening.
    s3.create_bucket(Bucket="trainstack-ckpt")
    s3.put_bucket_tagging(
        Bucket="trainstack-ckpt", Tagging={"TagSet": [{"Key": "trainstack:owner", "Value": OWNER}]}
    )
    outs = _create(CheckpointBucketProvider(), owner=OWNER)
    assert outs["arn"] == "arn:aws:s3:::trainstack-ckpt"
    assert s3.get_bucket_versioning(Bucket="trainstack-ckpt")["Status"] == "Enabled"


def test_create_tags_the_owner_and_keeps_other_tags_on_update(s3: Any) -> None:
    provider = CheckpointBucketProvider()
    outs = _create(provider, owner=OWNER)
    assert _tags(s3) == {"trainstack:owner": OWNER}
    s3.put_bucket_tagging(
        Bucket="trainstack-ckpt",
        Tagging={"TagSet": [{"Key": "team", "Value": "ml"}]},  # someone retags it, dropping ours
    )
    checked = provider.check({}, {"bucket_name": "trainstack-ckpt", "owner": OWNER}).inputs
    provider.update("trainstack-ckpt", outs, checked)
    assert _tags(s3) == {"team": "ml", "trainstack:owner": OWNER}


@pytest.mark.parametrize("tag", [None, "organization/trainstack/dev", "organization/other/prod"])
def test_a_strangers_bucket_is_never_adopted(s3: Any, tag: str | None) -> None:
    s3.create_bucket(Bucket="trainstack-ckpt")
    if tag:
        s3.put_bucket_tagging(
            Bucket="trainstack-ckpt", Tagging={"TagSet": [{"Key": "trainstack:owner", "Value": tag}]}
        )
    with pytest.raises(BucketError, match="is not this stack's") as err:
        _create(CheckpointBucketProvider(), owner=OWNER)
    assert "choose another bucket_name" in str(err.value)
    assert s3.get_bucket_versioning(Bucket="trainstack-ckpt").get("Status") is None  # left untouched


def test_an_endpoint_change_is_an_update_never_a_replace(s3: Any) -> None:
    # Issue 25: the bucket is its name and region; the endpoint is how to reach it.
    provider = CheckpointBucketProvider()
    outs = _create(provider)
    news = provider.check(
        {}, {"bucket_name": "trainstack-ckpt", "endpoint_url": "https://vpce.example"}
    ).inputs
    diff = provider.diff("trainstack-ckpt", outs, news)
    assert diff.changes and diff.replaces == []
    renamed = provider.check({}, {"bucket_name": "trainstack-ckpt-2"}).inputs
    assert provider.diff("trainstack-ckpt", outs, renamed).replaces == ["bucket_name"]
