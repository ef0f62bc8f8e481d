"""The agent's HTTP server (train/node/httpserve.py): bounded threads and a total deadline per request, so
idle or trickling peers cannot hold the agent (issue #34, class 5)."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge

from tests.polling import poll
from train.node.httpserve import BoundedWSGIServer, serve_metrics

WORKERS = 2


@pytest.fixture
def server() -> Iterator[BoundedWSGIServer]:
    registry = CollectorRegistry()
    Gauge("trainstack_test_up", "1", registry=registry).set(1)
    srv = serve_metrics(registry, 0, "127.0.0.1", workers=WORKERS, deadline_s=1.0)
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: BoundedWSGIServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/metrics"


def _scrape(srv: BoundedWSGIServer) -> str | None:
    try:
        with urllib.request.urlopen(_url(srv), timeout=5) as answer:  # noqa: S310 (loopback)
            return str(answer.read().decode())
    except OSError:
        return None


def _threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("metrics-http"))


def test_a_hundred_idle_connections_hold_a_bounded_number_of_threads(server: BoundedWSGIServer) -> None:
    idle = [socket.create_connection(server.server_address) for _ in range(100)]
    try:
        poll(lambda: server.refused >= 50, "connections past the bound refused", 30, 0.05)
        assert _threads() <= WORKERS + 2  # the pool, the accept loop, the deadline reaper
    finally:
        for sock in idle:
            sock.close()
    text = poll(lambda: _scrape(server), "a scrape once the idle connections are gone", 30)
    assert "trainstack_test_up 1.0" in text


def test_a_trickling_peer_is_cut_off_at_the_deadline(server: BoundedWSGIServer) -> None:
    sock = socket.create_connection(server.server_address)
    sock.settimeout(0.2)
    closed = threading.Event()

    def trickle() -> bool:
        # One byte per poll, never a whole request: only the total deadline can end it.
        try:
            sock.sendall(b"G")
            if sock.recv(1) == b"":
                closed.set()
        except TimeoutError:
            pass
        except OSError:
            closed.set()
        return closed.is_set()

    try:
        poll(trickle, "the server closing a connection that trickles", 30, 0.1)
    finally:
        sock.close()
    assert "trainstack_test_up 1.0" in (poll(lambda: _scrape(server), "a scrape after it", 30) or "")
