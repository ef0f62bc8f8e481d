"""The aggregator's agent reads (train/monitor/scrape.py): a total deadline per request, and no NaN or Inf
taken for a reading (issue #34, classes 4 and 5)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from train.monitor.scrape import Target, http_fetch, parse, scrape_all


class _Agent(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server: Any = self.server
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if server.behaviour == "trickle":
            while not server.stop.wait(0.2):  # a byte at a time, for as long as anyone reads
                try:
                    self.wfile.write(b"#")
                    self.wfile.flush()
                except OSError:
                    return
        else:
            self.wfile.write(b'trainstack_train_step{node="n",rank="0"} 12.0\n')

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def agent() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    server.behaviour, server.stop = "ok", threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.stop.set()
    server.shutdown()
    server.server_close()


def test_a_trickling_agent_is_cut_off_at_the_deadline_and_the_others_are_read(agent: Any) -> None:
    slow: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    slow.behaviour, slow.stop = "trickle", threading.Event()
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    targets = [
        Target("rank-0", f"http://127.0.0.1:{agent.server_address[1]}/metrics"),
        Target("rank-1", f"http://127.0.0.1:{slow.server_address[1]}/metrics"),
    ]
    found: list[Any] = []
    worker = threading.Thread(target=lambda: found.extend(scrape_all(targets, 0.0, timeout=1.0)), daemon=True)
    worker.start()
    worker.join(60)  # per-read timeouts would read the trickle for as long as it lasts
    try:
        assert len(found) == 2, "the round did not end"
        assert found[0].ok and found[0].step == 12.0
        assert found[1].error is not None and "unreachable" in found[1].error
    finally:
        slow.stop.set()
        slow.shutdown()
        slow.server_close()


def test_http_fetch_reads_a_whole_answer(agent: Any) -> None:
    assert "trainstack_train_step" in http_fetch(f"http://127.0.0.1:{agent.server_address[1]}/metrics", 5.0)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_a_non_finite_reading_is_taken_as_not_served(value: str) -> None:
    text = (
        f'trainstack_train_step{{node="n",rank="0"}} {value}\n'
        f'trainstack_gpu_utilization_ratio{{node="n",rank="0",gpu="0"}} {value}\n'
        'trainstack_gpu_temperature_celsius{node="n",rank="0",gpu="0"} 60\n'
    )
    sample = parse("n", 0.0, text)
    assert sample.step is None and sample.gpu_util == {} and sample.gpu_temp == {"0": 60.0}
