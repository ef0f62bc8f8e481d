"""The agent's HTTP server (train/node/httpserve.py) with real sockets on loopback (issue #34 class 5,
issue #49 class 3): a scrape is answered while a hundred peers hold idle connections, 200 scrapes 64 at a
time are all answered, idle and trickling peers are cut off at the deadline, and past the connection bound
the oldest idle peer makes way. node 0's aggregator reads the agents with `scrape.http_fetch`, so it is
checked against the same crowd.

No assertion is about how long something took: each waits for an event (an answer, a closed socket) with a
generous deadline that only bounds how long a failure takes to show (tests/polling.py)."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import CollectorRegistry, Gauge

from tests.polling import poll, scaled
from train.monitor.scrape import http_fetch
from train.node.httpserve import MetricsServer, serve_metrics

LINE = "trainstack_test_up 1.0"


def _server(max_connections: int = 256, deadline_s: float = 60.0) -> MetricsServer:
    registry = CollectorRegistry()
    Gauge("trainstack_test_up", "1", registry=registry).set(1)
    return serve_metrics(registry, 0, "127.0.0.1", max_connections=max_connections, deadline_s=deadline_s)


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    """Deadline 60 s: idle peers stay connected for the whole test unless the bound makes them go."""
    srv = _server()
    yield srv
    srv.close()


def _url(srv: MetricsServer, path: str = "/metrics") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


def _scrape(srv: MetricsServer) -> str:
    with urllib.request.urlopen(_url(srv), timeout=scaled(10)) as answer:  # noqa: S310 (loopback)
        return str(answer.read().decode())


def _idle(srv: MetricsServer, count: int) -> list[socket.socket]:
    return [socket.create_connection(srv.server_address, timeout=scaled(10)) for _ in range(count)]


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (reads end or reset); waits for it up to the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_scrape_is_answered_while_a_hundred_peers_hold_idle_connections(server: MetricsServer) -> None:
    idle = _idle(server, 100)
    try:
        poll(lambda: server.open_connections >= 100, "the server holding the 100 idle connections", 30, 0.05)
        assert LINE in _scrape(server)
        assert LINE in http_fetch(_url(server), timeout=scaled(10))  # what node 0's aggregator runs
        assert server.open_connections >= 100 and server.evicted == 0  # answered beside them, not instead
        workers = [t for t in threading.enumerate() if t.name.startswith("metrics-http")]
        assert len(workers) <= 2  # the loop and the one render thread, however many peers
    finally:
        for sock in idle:
            sock.close()


def test_200_scrapes_64_at_a_time_are_all_answered(server: MetricsServer) -> None:
    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(lambda _: _scrape(server), range(200)))
    assert all(LINE in text for text in answers)
    # The server counts an answer right after handing it to the socket; a scraper may have read it first.
    poll(lambda: server.answered >= 200, "the server counting its 200 answers", 30, 0.05)


def test_past_the_bound_the_oldest_idle_peer_makes_way_for_a_scrape() -> None:
    srv = _server(max_connections=20)
    idle = _idle(srv, 50)
    try:
        poll(lambda: srv.evicted >= 30, "the 30 oldest idle connections closed", 30, 0.05)
        assert LINE in _scrape(srv)
        assert srv.open_connections <= 20
        assert _closed_by_server(idle[0])  # the oldest went first
    finally:
        for sock in idle:
            sock.close()
        srv.close()


def test_idle_and_trickling_peers_are_cut_off_at_the_deadline() -> None:
    srv = _server(deadline_s=0.5)
    silent = socket.create_connection(srv.server_address, timeout=scaled(10))
    trickler = socket.create_connection(srv.server_address, timeout=0.05)
    try:
        assert _closed_by_server(silent)

        # One byte per poll, never a whole request: only the deadline for the whole head can end it.
        def trickle() -> bool:
            try:
                trickler.sendall(b"G")
            except OSError:
                return True
            return _closed_by_server(trickler)

        poll(trickle, "the server closing a connection that trickles", 30, 0.05)
        assert srv.cut_off >= 2
        assert LINE in _scrape(srv)
    finally:
        silent.close()
        trickler.close()
        srv.close()


def test_an_oversized_or_broken_request_is_refused(server: MetricsServer) -> None:
    big = socket.create_connection(server.server_address, timeout=scaled(10))
    try:
        big.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000)
        assert _closed_by_server(big)
    finally:
        big.close()
    for path, status in (("/nothing", 404), ("/favicon.ico", 404)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(_url(server, path), timeout=scaled(10))  # noqa: S310 (loopback)
        assert refused.value.code == status
    request = urllib.request.Request(_url(server), data=b"x", method="POST")  # noqa: S310 (loopback)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=scaled(10))  # noqa: S310 (loopback)
    assert refused.value.code == 405
    assert LINE in _scrape(server)


def test_an_address_that_is_not_this_hosts_fails_in_the_caller() -> None:
    """The agent serves on the hostfile address only when it is this host's: the bind error is the sign."""
    with pytest.raises(OSError):
        serve_metrics(CollectorRegistry(), 0, "192.0.2.1")  # TEST-NET-1: never a local address


def test_evicted_peers_are_one_line_a_minute_and_never_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Issue #62: each evicted idle peer wrote a traceback to the start script's log (Python 3.11's stream
    server reports a cancelled connection): 400 peers reconnecting for 12 s wrote 36 MB. The clock is the
    test's: a minute passes when the test says so."""
    now = [1000.0]
    lines: list[str] = []
    registry = CollectorRegistry()
    Gauge("trainstack_test_up", "1", registry=registry).set(1)
    srv = MetricsServer(registry, ("127.0.0.1", 0), max_connections=4, deadline_s=60, log=lines.append,
                        clock=lambda: now[0])  # fmt: skip
    idle = _idle(srv, 40)
    try:
        assert all(_closed_by_server(sock) for sock in idle[:36])  # the 36 oldest made way
        assert LINE in _scrape(srv)  # one more round of the loop: every evicted connection has ended
        assert srv.evicted >= 36 and len(lines) == 1 and "idle connection(s) closed" in lines[0]
        now[0] += 60
        idle += _idle(srv, 10)
        assert all(_closed_by_server(sock) for sock in idle[36:46])
        assert LINE in _scrape(srv)
        assert len(lines) == 2 and int(lines[1].split()[0]) >= 35  # the minute's evictions, counted
    finally:
        for sock in idle:
            sock.close()
        srv.close()
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not tracebacks, tracebacks[0].getMessage()
