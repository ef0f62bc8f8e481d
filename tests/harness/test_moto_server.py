"""The tests' moto S3 over TLS keeps answering when a client connects and never finishes its handshake.

werkzeug's TLS server does each handshake inside accept(), on its one accepting thread: an emulated host
whose namespace was deleted mid-handshake used to hold it forever (seen as a ReadTimeoutError of every later
S3 call in tests/hosts/test_local_cluster.py). harness.local starts moto with a socket timeout for that."""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from harness.local import start_moto_s3

pytestmark = pytest.mark.services


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_a_stalled_tls_handshake_does_not_hang_the_server(tmp_path: Path) -> None:
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
