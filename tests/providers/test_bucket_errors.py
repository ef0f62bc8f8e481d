"""S3 failures reach the user as a BucketError that names the operation, never as a botocore traceback."""

from __future__ import annotations

import socket

import pytest

from providers.s3.bucket import BucketError, CheckpointBucketProvider


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
