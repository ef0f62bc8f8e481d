"""S3 failures reach the user as a BucketError that names the operation, never as a botocore traceback."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from providers.s3.bucket import BucketError, BucketSpec, CheckpointBucketProvider
from providers.s3.errors import s3_errors


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_unreachable_endpoint_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    props = {"bucket_name": "gone-bucket", "region": "us-east-1", "endpoint_url": endpoint}
    with pytest.raises(BucketError, match="cannot delete the checkpoint bucket: the S3 endpoint does not"):
        CheckpointBucketProvider().delete("gone-bucket", props)


def test_a_delete_against_a_dead_endpoint_says_how_to_recover(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 25: a pending delete recorded against an endpoint that is gone must say what to do, and must
    # never fall back to today's endpoint, where a bucket of the same name may be the live one.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{_closed_port()}")
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    props = {"bucket_name": "gone-bucket", "region": "us-east-1", "endpoint_url": endpoint}
    with pytest.raises(BucketError, match="scripts/recover") as err:
        CheckpointBucketProvider().delete("gone-bucket", props)
    assert endpoint in str(err.value)


def test_a_read_whose_recorded_endpoint_is_gone_reads_through_the_current_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str | None] = []

    def factory(args: BucketSpec) -> Any:
        calls.append(args.endpoint_url)
        if args.endpoint_url == "http://127.0.0.1:1":
            raise EndpointConnectionError(endpoint_url=args.endpoint_url)
        return SimpleNamespace(head_bucket=_missing)

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    props = {"bucket_name": "b-1", "region": "us-east-1", "endpoint_url": "http://127.0.0.1:1"}
    result = CheckpointBucketProvider(factory).read("b-1", props)
    assert result.id is None  # read where S3 is now: the bucket is not there (moto came back empty)
    assert calls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]


def _missing(**_kwargs: Any) -> None:
    raise ClientError({"Error": {"Code": "404"}}, "HeadBucket")


def _failing(code: str, verb: str) -> None:
    @s3_errors(verb)
    def call() -> None:
        raise ClientError({"Error": {"Code": code, "Message": "secret-ish detail"}}, "PutBucketVersioning")

    call()


def test_a_bucket_s3_lost_says_so_and_the_way_out() -> None:
    """Issue #62: the local S3 restarted without the bucket, and the fix offered was the credentials."""
    with pytest.raises(BucketError) as err:
        _failing("NoSuchBucket", "update")
    said = str(err.value)
    assert "S3 answered PutBucketVersioning with NoSuchBucket (the bucket is gone)" in said
    assert "scripts/recover STACK" in said and "credentials" not in said and "secret-ish" not in said


def test_other_codes_keep_the_generic_line() -> None:
    with pytest.raises(BucketError, match="S3 refused PutBucketVersioning with SlowDown; check the AWS"):
        _failing("SlowDown", "update")
