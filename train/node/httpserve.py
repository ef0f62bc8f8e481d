"""The agent's HTTP server: prometheus_client's WSGI app behind a bounded pool and a per-request deadline.

prometheus_client's own `start_http_server` starts one thread per connection and bounds each read, not the
request: 100 idle connections held 100 threads, and a peer trickling a byte a second is never cut off
(issue #34). Here at most `workers` requests run at once and `workers` more wait; a connection past that
is closed at once, and every connection is shut down `deadline_s` after it was accepted, however it
trickles. Standard library and prometheus_client only: it runs on the node.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

DEADLINE_S = 5.0  # a scrape of the agent's few dozen metrics takes milliseconds
WORKERS = 4


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: a scrape every few seconds is not news."""


class BoundedWSGIServer(WSGIServer):
    """A WSGI server whose requests run on a fixed pool, each within a total deadline."""

    def __init__(
        self, address: tuple[str, int], workers: int = WORKERS, deadline_s: float = DEADLINE_S
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _QuietHandler)
        self.deadline_s = deadline_s
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="metrics-http")
        self._slots = threading.BoundedSemaphore(2 * workers)  # running + waiting
        self._lock = threading.Lock()
        self._deadlines: dict[socket.socket, float] = {}
        self.refused = 0  # connections closed because every slot was taken
        threading.Thread(target=self._reap, name="metrics-http-deadline", daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        request.settimeout(self.deadline_s)
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.deadline_s
        self._pool.submit(self._serve, request, client_address)

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError:
            pass  # the peer went away, or the deadline shut the socket: nothing to answer
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._lock:
                self._deadlines.pop(request, None)
            self.shutdown_request(request)
            self._slots.release()

    def _reap(self) -> None:
        """Shut down every connection past its deadline (its read then ends and the worker is freed)."""
        while True:
            time.sleep(min(0.5, self.deadline_s / 4))
            now = time.monotonic()
            with self._lock:
                overdue = [s for s, deadline in self._deadlines.items() if deadline <= now]
            for sock in overdue:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def serve_metrics(
    registry: CollectorRegistry, port: int, addr: str, workers: int = WORKERS, deadline_s: float = DEADLINE_S
) -> BoundedWSGIServer:
    """Serve `registry` on http://addr:port/metrics from a daemon thread; returns the server."""
    server = BoundedWSGIServer((addr, port), workers, deadline_s)
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
