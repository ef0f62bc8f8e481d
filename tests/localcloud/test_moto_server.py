"""The tests' moto S3 over TLS keeps answering when a client connects and never finishes its handshake.

werkzeug's TLS server does each handshake inside accept(), on its one accepting thread: an emulated host
whose namespace was deleted mid-handshake used to hold it forever (seen as a ReadTimeoutError of every later
S3 call in tests/hosts/test_local_cluster.py). harness.local starts moto with a socket timeout for that."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from harness.local import start_moto_s3
from localcloud.moto_server import applicable_policy, atomic_puts
from providers.s3.client import tls_only_policy


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "s3.crt", tmp_path / "s3.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *(
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=trainstack-test-s3",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_a_stalled_tls_handshake_does_not_hang_the_server(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    moto = start_moto_s3(tmp_path / "moto.log", tls=(cert, key), socket_timeout_s=2)
    try:
        where = urlsplit(moto.endpoint_url)
        with socket.create_connection((where.hostname, where.port), timeout=20) as stalled:  # says nothing
            verify = ssl.create_default_context(cafile=str(cert))
            # Without the socket timeout this waits on the stalled handshake until the client gives up.
            answer = httpx.get(f"{moto.endpoint_url}/moto-api/", verify=verify, timeout=20)
            assert answer.status_code == 200
            assert stalled.recv(1) == b""  # the server dropped the silent connection
    finally:
        moto.stop()


def test_only_the_statements_whose_condition_holds_apply() -> None:
    policy = json.loads(tls_only_policy("b"))
    over_http = json.loads(applicable_policy(json.dumps(policy), {"aws:SecureTransport": "false"}))
    over_tls = json.loads(applicable_policy(json.dumps(policy), {"aws:SecureTransport": "true"}))
    assert [st["Sid"] for st in over_http["Statement"]] == ["DenyInsecureTransport"]
    assert "Condition" not in over_http["Statement"][0]
    assert over_tls["Statement"] == []


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_the_tls_only_policy_refuses_plain_http_and_lets_https_through(tmp_path: Path) -> None:
    """The bucket's DenyInsecureTransport, as the provider sets it, against moto over each transport:
    stock moto refused both (it does not evaluate the Bool condition)."""
    cert, key = _certificate(tmp_path)
    plain = start_moto_s3(tmp_path / "plain.log")
    tls = start_moto_s3(tmp_path / "tls.log", tls=(cert, key))
    try:
        for moto, verify, allowed in ((plain, True, False), (tls, str(cert), True)):
            s3 = boto3.client(
                "s3",
                endpoint_url=moto.endpoint_url,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                verify=verify,
            )
            s3.create_bucket(Bucket="ckpt")
            s3.put_bucket_policy(Bucket="ckpt", Policy=tls_only_policy("ckpt"))
            if allowed:
                s3.put_object(Bucket="ckpt", Key="step-1.pt", Body=b"w")
                assert s3.get_object(Bucket="ckpt", Key="step-1.pt")["Body"].read() == b"w"
            else:
                with pytest.raises(ClientError) as denied:
                    s3.put_object(Bucket="ckpt", Key="step-1.pt", Body=b"w")
                assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    finally:
        plain.stop()
        tls.stop()


def test_the_server_handles_one_put_object_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3's conditional writes are atomic; moto's PutObject checks If-None-Match / If-Match and then stores,
    each request on a thread of its own (two supervisors both took the lease in CI, supervisor/store.py).
    localcloud.moto_server's `atomic_puts` lets one in at a time: a second request arrives while the first is
    inside, and it must not get in before the first is out."""
    from moto.s3.responses import S3Response

    inside, second_tried, overlapped = threading.Event(), threading.Event(), threading.Event()

    def fake_put_object(self: object) -> str:
        if inside.is_set():
            overlapped.set()
            return "second"
        inside.set()
        second_tried.wait(timeout=5)  # the other thread is waiting on the lock (or got in, without it)
        time.sleep(0.2)  # room for it to enter, were it let in: not a timing assertion
        inside.clear()
        return "first"

    monkeypatch.setattr(S3Response, "put_object", fake_put_object)
    atomic_puts()

    def second() -> str:
        inside.wait(timeout=5)
        second_tried.set()
        return str(S3Response.put_object(None))  # type: ignore[arg-type]

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: str(S3Response.put_object(None)))  # type: ignore[arg-type]
        other = pool.submit(second)
        assert (first.result(timeout=30), other.result(timeout=30)) == ("first", "first")
    assert not overlapped.is_set()
