"""Alert messages to a Slack-compatible incoming webhook: one when an alert fires, one when it resolves.

Incoming webhooks take `POST {"text": "..."}` as JSON (Slack, "Sending messages using incoming webhooks",
api.slack.com/messaging/webhooks; Mattermost and Discord's /slack endpoint take the same body). The URL is the
secret (`trainstack:secrets.ALERT_WEBHOOK_URL`): it is never logged, and no message carries anything but
metrics and node names. Failures are retried with capped exponential backoff and jitter (429 honours
`Retry-After`), then dropped with a log line: a webhook outage never stops training or the aggregator.
Written on the standard library (http.client) so the node image needs no HTTP client for one POST a round.

Hardened for what the message and the peer may hold: every message is escaped the way Slack
asks (`&`, `<`, `>`; api.slack.com/reference/surfaces/formatting#escaping), so a node's text can make no
link and no `<!channel>`, and `@` before a name gets a zero-width joiner so Mattermost and Discord make no
mention either; each attempt has a total deadline (a trickling peer is cut off, not waited on per read);
a redirect is not followed and not counted as delivered (logged, retried); the URL must be https (http
only to a loopback address, for tests) and carry no user:password (`webhook_url_problem`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from train.monitor.evaluate import Money, Transition
from train.monitor.rules import AlertRules
from train.monitor.scrape import NodeSample
from train.monitor.webhook_url import webhook_url_problem

# (url, body, timeout) -> (status, retry-after seconds)
Post = Callable[[str, bytes, float], tuple[int, float | None]]
Log = Callable[[str], None]


def http_post(url: str, body: bytes, timeout: float) -> tuple[int, float | None]:
    """POST `body`; (status, Retry-After seconds). The whole attempt ends within `timeout`: at the deadline
    the socket is shut down, mid-header or mid-body. Redirects are answers, never followed."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    timer: threading.Timer | None = None
    try:
        conn.connect()
        sock = conn.sock
        if sock is not None:

            def cut() -> None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

            timer = threading.Timer(timeout, cut)
            timer.daemon = True
            timer.start()
        path = parts.path or "/"
        conn.request("POST", f"{path}?{parts.query}" if parts.query else path, body,
                     {"Content-Type": "application/json"})  # fmt: skip
        resp = conn.getresponse()
        resp.read(1 << 16)
        retry_after = resp.getheader("Retry-After")
        try:
            wait = float(retry_after) if retry_after is not None else None
        except ValueError:
            wait = None
        return resp.status, wait if wait is None or 0 <= wait < 1e6 else None
    except http.client.HTTPException as exc:
        raise OSError(type(exc).__name__) from None
    finally:
        if timer is not None:
            timer.cancel()
        conn.close()


_MENTION = re.compile(r"@(?=\w)")


def slack_text(text: str) -> str:
    """`text` as chat shows it literally: Slack's three escapes, and no `@name` mention."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub("@\u2060", escaped)


@dataclass
class Webhook:
    """Posts one message with retries; returns whether it was delivered. Never raises."""

    url: str
    post: Post = http_post
    sleep: Callable[[float], None] = time.sleep
    log: Log = print
    attempts: int = 5
    timeout_s: float = 10.0
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def send(self, text: str) -> bool:
        problem = webhook_url_problem(self.url)  # a port past 65535 raised out of http_post (issue #62)
        if problem is not None:
            self.log(f"alerts: the webhook URL {problem}; message dropped")
            return False
        body = json.dumps({"text": slack_text(text)}).encode()
        for attempt in range(1, self.attempts + 1):
            try:
                status, retry_after = self.post(self.url, body, self.timeout_s)
            except OSError as exc:
                status, retry_after = 0, None
                reason = type(exc).__name__
            else:
                reason = f"HTTP {status}"
                if 200 <= status < 300:
                    return True
                if 300 <= status < 400:
                    # A redirect delivers nothing (the other host would get a bodiless GET): say so, retry.
                    self.log(f"alerts: the webhook answered a redirect ({reason}); not delivered, retrying")
                elif status < 500 and status != 429:
                    self.log(f"alerts: the webhook refused the message ({reason}); not retried")
                    return False
            if attempt == self.attempts:
                break
            delay = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            self.sleep(min(self.max_delay_s, retry_after) if retry_after is not None else delay)
        self.log(f"alerts: webhook failed after {self.attempts} attempts (last: {reason}); message dropped")
        return False


def format_transition(t: Transition, stack: str) -> str:
    a = t.alert
    if t.state == "firing":
        icon = ":red_circle:" if a.severity == "critical" else ":warning:"
        return f"{icon} [{stack}] {a.severity.upper()} {a.rule}: {a.summary}\n→ {a.advice}"
    return f":white_check_mark: [{stack}] resolved {a.rule}: {a.summary}"


def format_digest(stack: str, samples: Sequence[NodeSample], money: Money | None) -> str:
    """The golden metrics in a few lines: utilisation, bandwidth, NVMe latency, progress, money."""
    ok = [s for s in samples if s.ok]
    utils = [u for s in ok for u in s.gpu_util.values()]
    p99 = [s.nvme_write_p99_s for s in ok if s.nvme_write_p99_s is not None]
    bw = [s.busbw_bytes_per_s for s in ok if s.busbw_bytes_per_s is not None]
    steps = [s.step for s in ok if s.step is not None]
    lines = [f":bar_chart: [{stack}] {len(ok)}/{len(samples)} nodes reporting"]
    if utils:
        lines.append(f"GPU utilisation min {min(utils):.0%} / mean {sum(utils) / len(utils):.0%}")
    if bw:
        lines.append(f"all-reduce bus bandwidth min {min(bw) / 1e9:.1f} GB/s")
    if p99:
        lines.append(f"NVMe p99 write worst {max(p99) * 1e6:.0f} us")
    if steps:
        lines.append(f"training step {max(steps):.0f}")
    if money is not None:
        lines.append(
            f"spent ${money.spent_usd:,.2f} at ${money.burn_usd_per_h:,.2f}/h; "
            f"projected ${money.projected_usd:,.0f} (budget ${money.budget_usd:,.0f})"
        )
    return "\n".join(lines)


@dataclass
class Notifier:
    """Turns transitions into messages under a per-hour rate limit, plus a periodic digest."""

    rules: AlertRules
    stack: str
    send: Callable[[str], bool]
    sent_at: deque[float] = field(default_factory=deque)
    suppressed: int = 0
    last_digest: float | None = None

    def _allowed(self, now: float) -> bool:
        while self.sent_at and now - self.sent_at[0] >= 3600:
            self.sent_at.popleft()
        return len(self.sent_at) < self.rules.max_messages_per_hour

    def _emit(self, text: str, now: float) -> None:
        if not self._allowed(now):
            self.suppressed += 1
            return
        if self.suppressed:
            text += f"\n({self.suppressed} earlier message(s) held back by the rate limit; see scripts/watch)"
            self.suppressed = 0
        self.sent_at.append(now)
        self.send(text)

    def handle(self, transitions: Sequence[Transition], now: float) -> None:
        for t in transitions:
            self._emit(format_transition(t, self.stack), now)

    def maybe_digest(self, samples: Sequence[NodeSample], money: Money | None, now: float) -> None:
        every = self.rules.digest_every_s
        if every <= 0:
            return
        if self.last_digest is None:
            self.last_digest = now  # the first digest comes one cadence after start
            return
        if now - self.last_digest >= every:
            self.last_digest = now
            self._emit(format_digest(self.stack, samples, money), now)
