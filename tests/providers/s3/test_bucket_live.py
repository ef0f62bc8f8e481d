"""`s3:CheckpointBucket` over real HTTP against the moto S3 server (`moto_s3`), endpoint from env."""

from __future__ import annotations

import boto3
import pytest

from providers.s3.bucket import BucketError, CheckpointBucketProvider

pytestmark = pytest.mark.services


def test_bucket_lifecycle_against_an_s3_endpoint(moto_s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_s3)
    provider = CheckpointBucketProvider()
    checked = provider.check({}, {"bucket_name": "live-ckpt", "tls_only": False})
    assert checked.failures == []
    created = provider.create(checked.inputs)
    outs = created.outs or {}
    assert outs["endpoint_url"] == moto_s3
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    assert s3.get_bucket_versioning(Bucket="live-ckpt")["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket="live-ckpt")["PublicAccessBlockConfiguration"][
        "BlockPublicPolicy"
    ]
    s3.put_object(Bucket="live-ckpt", Key="ckpt/0.pt", Body=b"x")
    with pytest.raises(BucketError, match="force_destroy"):
        provider.delete(created.id, outs)
    # (tls_only stays off: this endpoint is plain http, and the TLS-only policy would deny us too)
    changed = provider.check(
        {}, {"bucket_name": "live-ckpt", "tls_only": False, "lifecycle": {"noncurrent_expire_days": 14}}
    ).inputs
    assert provider.diff(created.id, outs, changed).replaces == []
    outs = provider.update(created.id, outs, changed).outs or {}
    rules = s3.get_bucket_lifecycle_configuration(Bucket="live-ckpt")["Rules"]
    assert {r["ID"]: r for r in rules}["expire-noncurrent-versions"]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": 14
    }
    provider.delete(created.id, {**outs, "force_destroy": True})
    assert provider.read(created.id, outs).id is None
