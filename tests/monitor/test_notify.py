"""Webhook delivery and the message policy: retries with backoff, one message per transition, rate limit."""

from __future__ import annotations

import json
from dataclasses import replace

from train.monitor.evaluate import Alert, Money, Transition
from train.monitor.notify import Notifier, Webhook, format_digest
from train.monitor.rules import AlertRules
from train.monitor.scrape import NodeSample

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
