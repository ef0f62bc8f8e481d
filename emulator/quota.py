"""Per-key request quotas: one sliding window each (minute, hour, day) and the headers that show them.

The v2 spec's `RateLimit-Policy` header (components/schemas/RateLimitPolicyHeader) is "a structured-field
list with one member per window (`minute`, `hour`, `day`), each carrying the quota `q` and the window
length in seconds `w`"; `RateLimit` carries "the remaining request count `r` and seconds until the
window resets `t`" per window, "returned on responses to authenticated requests, not only on 429s".
Its example quota is 60/min, 3000/h, 50000/day. A 429 "identifies the window that was exceeded and how
long to wait" (components/responses/TooManyRequestsError).

A quota is "at most `q` requests in any `w` seconds", so each window counts what it admitted in SLOTS slots
of w/SLOTS seconds and admits a request while the slots of the last window (the current slot and the SLOTS
before it) hold fewer than `q`: no span of `w` seconds ever holds more than `q` (it lies within those
slots), at a cost of one slot's strictness (a second of the hour: a client paced at `q` per hour, as
providers/runpod/ratelimit.py's, never meets a 429). A bucket that starts full and refills `q` per window,
as here until issue #62, let about 2q through in one window (3,100 requests in 57 minutes under 3,000/h).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

# (window name, length in seconds), in the order the spec's headers list them.
WINDOWS: tuple[tuple[str, int], ...] = (("minute", 60), ("hour", 3600), ("day", 86400))
SLOTS = 3600  # slots a window is counted in: an hour by the second, a minute by the 1/60 s, a day by 24 s


@dataclass
class Window:
    """At most `quota` requests in any `window_s` span, counted per slot on the emulator's clock."""

    quota: int
    window_s: int
    counts: deque[list[int]] = field(
        default_factory=deque
    )  # [slot index, requests admitted in it], oldest first
    total: int = 0

    def _slot(self, now: float) -> int:
        return math.floor(now * SLOTS / self.window_s)

    def used(self, now: float) -> int:
        """Requests admitted in the slots that still count (older ones forgotten)."""
        oldest = self._slot(now) - SLOTS
        while self.counts and self.counts[0][0] < oldest:
            self.total -= self.counts.popleft()[1]
        return self.total

    def remaining(self, now: float) -> int:
        return max(0, self.quota - self.used(now))

    def take(self, now: float) -> None:
        slot = self._slot(now)
        if self.counts and self.counts[-1][0] == slot:
            self.counts[-1][1] += 1
        else:
            self.counts.append([slot, 1])
        self.total += 1

    def _leaves_at(self, slot: int) -> float:
        """When a slot's requests stop counting: once the current slot is SLOTS + 1 past it."""
        return (slot + SLOTS + 1) * self.window_s / SLOTS

    def wait_s(self, now: float) -> int:
        """Seconds until one request fits again (at least 1)."""
        over = self.used(now) - self.quota + 1
        for slot, count in self.counts:
            over -= count
            if over <= 0:
                return max(1, math.ceil(self._leaves_at(slot) - now))
        return 1

    def reset_s(self, now: float) -> int:
        """Seconds until this window is whole again (the header's `t`)."""
        if not self.used(now):
            return 0
        return max(0, math.ceil(self._leaves_at(self.counts[-1][0]) - now))


class Quota:
    """All windows of one API key; a request is admitted only if every window has room for it."""

    def __init__(self, now: float, quotas: dict[str, int]) -> None:
        self.now = now
        self.buckets = {name: Window(quotas[name], length) for name, length in WINDOWS}

    def _adjust(self, now: float, quotas: dict[str, int]) -> None:
        """Quotas changed by the admin API apply at once (what was admitted still counts)."""
        self.now = now
        for name, bucket in self.buckets.items():
            bucket.quota = quotas[name]

    def take(self, now: float, quotas: dict[str, int]) -> str | None:
        """Spend one request; returns None if admitted, else the name of the first exhausted window."""
        self._adjust(now, quotas)
        for name, bucket in self.buckets.items():
            if bucket.remaining(now) < 1:
                return name
        for bucket in self.buckets.values():
            bucket.take(now)
        return None

    def headers(self) -> dict[str, str]:
        now = self.now
        live = ", ".join(f'"{n}";r={b.remaining(now)};t={b.reset_s(now)}' for n, b in self.buckets.items())
        policy = ", ".join(f'"{n}";q={b.quota};w={b.window_s}' for n, b in self.buckets.items())
        return {"RateLimit": live, "RateLimit-Policy": policy}

    def retry_after(self) -> int:
        """Seconds until every exhausted window has room for one more request."""
        now = self.now
        return max((b.wait_s(now) for b in self.buckets.values() if b.remaining(now) < 1), default=1)
