"""Webhook delivery and the message policy: retries with backoff, one message per transition, rate limit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from train.monitor.evaluate import Alert, Money, Transition
from train.monitor.notify import Notifier, Webhook, format_digest
from train.monitor.rules import AlertRules
from train.monitor.scrape import NodeSample
from train.monitor.webhook_url import webhook_url_problem

URL = "https://hooks.example.invalid/services/T000/B000/SECRETPART"


def _alert(i: int = 0) -> Alert:
    return Alert("gpu_temperature_high", "warning", f"rank-{i}", "0", f"rank-{i} GPU 0: 90 C", "cool it")


def test_retries_5xx_and_429_then_delivers_with_backoff_and_retry_after() -> None:
    answers = [(503, None), (429, 7.0), (200, None)]
    bodies: list[bytes] = []
    sleeps: list[float] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, float | None]:
        assert url == URL and timeout > 0
        bodies.append(body)
        return answers.pop(0)

    hook = Webhook(URL, post=post, sleep=sleeps.append, log=lambda _: None)
    assert hook.send("hello") is True
    assert [json.loads(b) for b in bodies] == [{"text": "hello"}] * 3
    assert 0.5 <= sleeps[0] <= 1.0 and sleeps[1] == 7.0


def test_gives_up_without_raising_and_never_logs_the_url() -> None:
    logs: list[str] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, float | None]:
        raise ConnectionRefusedError(URL)  # even an exception text holding the URL must not reach the log

    hook = Webhook(URL, post=post, sleep=lambda _: None, log=logs.append, attempts=3)
    assert hook.send("x") is False
    assert len(logs) == 1 and "after 3 attempts" in logs[0]
    assert "SECRETPART" not in logs[0] and "hooks.example" not in logs[0]


def test_a_4xx_is_not_retried() -> None:
    calls = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, float | None]:
        calls.append(1)
        return 404, None

    assert Webhook(URL, post=post, sleep=lambda _: None, log=lambda _: None).send("x") is False
    assert len(calls) == 1


def test_one_message_per_transition_and_the_rate_limit_counts_what_it_held_back() -> None:
    sent: list[str] = []
    n = Notifier(replace(AlertRules(), max_messages_per_hour=2), "prod", lambda t: sent.append(t) or True)
    n.handle([Transition("firing", _alert(i), 0) for i in range(3)], now=0)
    assert len(sent) == 2 and "rank-0" in sent[0] and "WARNING" in sent[0]
    n.handle([Transition("resolved", _alert(0), 3600)], now=3600)
    assert len(sent) == 3 and "resolved" in sent[2] and "1 earlier message(s) held back" in sent[2]


def test_digest_comes_at_its_cadence_with_the_golden_metrics() -> None:
    sent: list[str] = []
    n = Notifier(replace(AlertRules(), digest_every_s=600), "prod", lambda t: sent.append(t) or True)
    s = [
        NodeSample("rank-0", 0, gpu_util={"0": 0.8}, nvme_write_p99_s=50e-6, busbw_bytes_per_s=300e9, step=42)
    ]
    money = Money(12.5, 255.36, 4000, 5000)
    for now in (0, 300, 600, 900, 1200):
        n.maybe_digest(s, money, now)
    assert len(sent) == 2
    assert sent[0] == format_digest("prod", s, money)
    assert "GPU utilisation min 80%" in sent[0] and "300.0 GB/s" in sent[0] and "50 us" in sent[0]
    assert "step 42" in sent[0] and "$12.50" in sent[0]


# Issue #34, classes 3 and 5: what a node's text and the webhook's peer may hold.
def test_a_node_string_reaches_the_chat_as_text_not_as_a_mention_or_link() -> None:
    bodies: list[bytes] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, float | None]:
        bodies.append(body)
        return 200, None

    label = "NVIDIA H100 <!channel> <https://evil.example/login|re-authenticate here> & @team @here"
    assert Webhook(URL, post=post, sleep=lambda _: None, log=lambda _: None).send(f"GPU {label}") is True
    text = json.loads(bodies[0])["text"]
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt; &lt;https://evil.example/login|re-authenticate here&gt; &amp;" in text
    assert "@team" not in text and "@here" not in text and "@\u2060team" in text


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("hooks.slack.com/services/T/B/X", "must be an https:// URL"),
        ("file:///etc/passwd", "must be an https:// URL"),
        ("ftp://hooks.slack.com/x", "must be an https:// URL"),
        ("http://hooks.slack.com/services/T/B/X", "must be https://"),
        ("https://user:pw@hooks.slack.com/services/T/B/X", "user:password"),
        ("https://", "must be an https:// URL"),
        ("https://hooks.slack.com:notaport/x", "is not a URL"),
    ],
)
def test_a_webhook_url_the_aggregator_cannot_use_is_named_without_its_value(url: str, words: str) -> None:
    problem = webhook_url_problem(url)
    assert problem is not None and words in problem
    assert "hooks.slack.com" not in problem and "passwd" not in problem


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T/B/X", "http://127.0.0.1:8080/hook"])
def test_https_and_loopback_http_urls_pass(url: str) -> None:
    assert webhook_url_problem(url) is None


class _Peer(BaseHTTPRequestHandler):
    """A webhook peer: `behaviour` on the server says how it answers."""

    def do_POST(self) -> None:
        server: Any = self.server
        server.posts += 1
        if server.behaviour == "redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2:9/elsewhere")
            self.end_headers()
        elif server.behaviour == "trickle":
            self.wfile.write(b"H")
            self.wfile.flush()
            while not server.stop.wait(0.2):  # one byte at a time until the client goes away
                try:
                    self.wfile.write(b"T")
                    self.wfile.flush()
                except OSError:
                    return
        else:
            self.send_response(200)
            self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def peer() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Peer)
    server.posts, server.behaviour, server.stop = 0, "ok", threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.stop.set()
    server.shutdown()
    server.server_close()


def test_a_redirect_is_not_delivered_and_is_logged_and_retried(peer: Any) -> None:
    peer.behaviour = "redirect"
    logs: list[str] = []
    url = f"http://127.0.0.1:{peer.server_address[1]}/hook"
    assert Webhook(url, sleep=lambda _: None, log=logs.append, attempts=3).send("x") is False
    assert peer.posts == 3
    assert sum("redirect (HTTP 302); not delivered" in line for line in logs) == 3
    assert "after 3 attempts" in logs[-1]


def test_a_trickling_peer_ends_each_attempt_at_its_deadline(peer: Any) -> None:
    """Per-read timeouts never end this peer (a byte every 0.2 s); the attempt's total deadline does."""
    peer.behaviour = "trickle"
    url = f"http://127.0.0.1:{peer.server_address[1]}/hook"
    done: list[bool] = []
    hook = Webhook(url, sleep=lambda _: None, log=lambda _: None, attempts=2, timeout_s=1.0)
    worker = threading.Thread(target=lambda: done.append(hook.send("x")), daemon=True)
    worker.start()
    worker.join(60)  # the peer would trickle for as long as it is read
    assert done == [False] and peer.posts == 2


def test_a_url_with_a_port_out_of_range_is_dropped_with_a_line_not_raised() -> None:
    """Issue #62: `https://host:99999/...` raised ValueError out of http_post (Webhook.send promises never to
    raise): reconcile and supervise ended in a traceback with exit 1, their verdict's code."""
    logs: list[str] = []

    def never(_: float) -> None:
        raise AssertionError("a URL that can never work is not retried")

    hook = Webhook("https://hooks.example.invalid:99999/services/SECRETPART", sleep=never, log=logs.append)
    assert hook.send("x") is False
    said = "is not a URL; paste the webhook URL your chat gives, https://..."
    assert logs == [f"alerts: the webhook URL {said}; message dropped"]
