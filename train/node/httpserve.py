"""The agent's HTTP server: asyncio's stream server with a deadline per request, a bound on connections and
one rendering of the metrics shared by every scrape that asks at once.

Round 3 ran prometheus_client's WSGI app on a pool of 4 threads with 4 more connections waiting: a slot was
held from accept to answer, so 8 peers that connect and send nothing took every slot for the whole 5 s
deadline, again and again, and of 64 scrapes at once 56 were closed unanswered. Neither a
thread-per-connection server (prometheus_client's own, http.server's ThreadingHTTPServer: a thread per idle
peer, unbounded) nor a bounded pool (idle peers hold its slots) can give a scraper an answer while idle peers
are connected. An event loop can: a connection costs a coroutine, not a thread, until its request is whole.
asyncio's server (standard library, on every node) accepts and buffers; what is ours is small:

- every connection must deliver its whole request head within `deadline_s` of being accepted (one read
  timeout for all its reads, so a peer trickling a byte a second is cut off like a silent one), and must
  take its answer within `deadline_s` too; a head over 8 KiB is refused;
- at most `max_connections` are open: one more closes the oldest connection that has not yet sent a whole
  request (never one being answered), so a thousand idle peers cannot keep a scraper out, only make it wait
  its turn in the kernel's accept queue;
- concurrent scrapes share one rendering (`generate_latest`, in one worker thread, off the loop): 64 at
  once cost one render, and every request is answered;
- what it logs is bounded: evicted peers are one line a minute at most (with their count), and anything the
  event loop would report with a traceback is one line a minute at most too. Python 3.11's stream server
  reported each cancelled connection with a traceback: 400 peers reconnecting for 12 s wrote 36 MB to the
  start script's log (issue #62); an evicted connection now ends without being cancelled from outside it.

GET or HEAD of /metrics (or /) answers the Prometheus text format; anything else gets 404 or 405. Every
answer closes its connection. Standard library and prometheus_client only: it runs on the node.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

DEADLINE_S = 5.0  # a scrape of the agent's few dozen metrics takes milliseconds
MAX_CONNECTIONS = 256  # idle peers beyond this close the oldest idle one, never a scrape being answered
MAX_HEAD = 8192  # bytes of request line and headers
LOG_EVERY_S = 60.0  # at most one line a minute for each kind of thing the server says
_STATUS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Server Error"}


class MetricsServer:
    """Serves one registry on one address from its own thread (an event loop) until `close()`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        address: tuple[str, int],
        max_connections: int = MAX_CONNECTIONS,
        deadline_s: float = DEADLINE_S,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.max_connections = max_connections
        self.deadline_s = deadline_s
        self._log = log or (lambda _line: None)
        self._clock = clock
        self._said_at: dict[str, float] = {}  # the last line of each kind, by the clock
        self._unsaid = 0  # evictions since the last line about them
        # Counters for tests and logs; written by the loop's thread only.
        self.answered = 0
        self.evicted = 0  # idle connections closed to make room for a new one
        self.cut_off = 0  # connections closed at the deadline, or for an oversized or broken request
        self._open = 0
        self._waiting: dict[asyncio.Task[Any], None] = {}  # connections without a whole request, oldest first
        self._rendering: asyncio.Future[bytes] | None = None
        self._render_pool = ThreadPoolExecutor(1, thread_name_prefix="metrics-http-render")
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)  # an address that is not this host's fails here, in the caller
            sock.listen(1024)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.server_address: tuple[str, int] = sock.getsockname()[:2]
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, started), name="metrics-http", daemon=True
        )
        self._thread.start()
        started.wait()

    @property
    def open_connections(self) -> int:
        return self._open

    def close(self) -> None:
        """Stop serving and close every connection (tests; the agent serves until its process ends)."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._render_pool.shutdown(wait=False)

    def _run(self, sock: socket.socket, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, sock=sock, limit=MAX_HEAD, backlog=1024)
        )
        started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection in a task
        self._open += 1
        self._waiting[task] = None
        if self._open > self.max_connections:
            self._evict_oldest_idle(task)
        try:
            status, body, head_only = await self._request(reader)
            self._waiting.pop(task, None)
            if status == 200:
                body = await self._metrics()
            writer.write(_response(status, body, head_only))
            writer.close()  # after what is buffered is sent: the answer arrives whole, then the FIN
            # Counted once the whole answer is handed to the socket: a scraper that has read it may close
            # first, and the wait below then ends in a reset (a loaded CI counted 153 of 200 answers).
            self.answered += 1
            await asyncio.wait_for(writer.wait_closed(), self.deadline_s)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.cut_off += 1
        except (ConnectionError, OSError):
            pass  # the peer went away: nothing to answer
        except asyncio.CancelledError:
            pass  # evicted, or the server is closing: the connection ends here, quietly
        finally:
            self._waiting.pop(task, None)
            self._open -= 1
            if not writer.transport.is_closing() or writer.transport.get_write_buffer_size():
                writer.transport.abort()  # cut off, evicted or gone: nothing more is sent

    def _evict_oldest_idle(self, newcomer: asyncio.Task[Any]) -> None:
        oldest = next((t for t in self._waiting if t is not newcomer), newcomer)
        self._waiting.pop(oldest, None)
        oldest.cancel()
        self.evicted += 1
        self._unsaid += 1
        if self._say(
            "evicted",
            f"{self._unsaid} idle connection(s) closed to make room (at most {self.max_connections} open; "
            "the oldest without a whole request go first); a scraper is still answered",
        ):
            self._unsaid = 0

    def _say(self, kind: str, line: str) -> bool:
        """Log `line` unless a line of this kind was logged less than LOG_EVERY_S ago; whether it was."""
        now = self._clock()
        last = self._said_at.get(kind)
        if last is not None and now - last < LOG_EVERY_S:
            return False
        self._said_at[kind] = now
        self._log(line)
        return True

    def _loop_error(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """What the event loop would print with a traceback: one line a minute at most, without it."""
        exc = context.get("exception")
        what = f": {type(exc).__name__}" if exc is not None else ""
        self._say(
            "loop",
            f"metrics server: {context.get('message', 'error')}{what} (later ones this minute not logged)",
        )

    async def _request(self, reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
        """(status, body for an error status, whether only the head is asked for) of one request head."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.deadline_s)
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, b"bad request\n", False
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return 405, b"GET /metrics\n", False
        if target not in (b"/metrics", b"/"):
            return 404, b"GET /metrics\n", method == b"HEAD"
        return 200, b"", method == b"HEAD"

    async def _metrics(self) -> bytes:
        """The registry's text; scrapes that ask while one is being rendered share it."""
        if self._rendering is None:
            rendering = self._loop.run_in_executor(self._render_pool, generate_latest, self.registry)
            self._rendering = rendering

            def done(_: object) -> None:
                self._rendering = None

            rendering.add_done_callback(done)
        try:
            return await asyncio.shield(self._rendering)
        except Exception:  # a collector that raised: say so rather than hang up
            return b"# the metrics could not be rendered\n"


def _response(status: int, body: bytes, head_only: bool) -> bytes:
    content_type = CONTENT_TYPE_LATEST if status == 200 else "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status} {_STATUS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    return head if head_only else head + body


def serve_metrics(
    registry: CollectorRegistry,
    port: int,
    addr: str,
    max_connections: int = MAX_CONNECTIONS,
    deadline_s: float = DEADLINE_S,
    log: Callable[[str], None] | None = None,
) -> MetricsServer:
    """Serve `registry` on http://addr:port/metrics from a daemon thread; returns the server. OSError (the
    port taken, an address not this host's) reaches the caller."""
    return MetricsServer(registry, (addr, port), max_connections, deadline_s, log=log)
