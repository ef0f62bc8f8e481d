"""Per-key request quotas: one token bucket per window (minute, hour, day) and the headers that show them.

The v2 spec's `RateLimit-Policy` header (components/schemas/RateLimitPolicyHeader) is "a structured-field
list with one member per window (`minute`, `hour`, `day`), each carrying the quota `q` and the window
length in seconds `w`"; `RateLimit` carries "the remaining request count `r` and seconds until the
window resets `t`" per window, "returned on responses to authenticated requests, not only on 429s".
Its example quota is 60/min, 3000/h, 50000/day. A 429 "identifies the window that was exceeded and how
long to wait" (components/responses/TooManyRequestsError).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# (window name, length in seconds), in the order the spec's headers list them.
WINDOWS: tuple[tuple[str, int], ...] = (("minute", 60), ("hour", 3600), ("day", 86400))


@dataclass
class Bucket:
    """`quota` requests per `window_s`, refilled continuously on the emulator's clock; burst = quota."""

    quota: int
    window_s: int
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        per_s = self.quota / self.window_s
        self.tokens = min(float(self.quota), self.tokens + max(0.0, now - self.updated) * per_s)
        self.updated = now

    def reset_s(self) -> int:
        """Seconds until this window is whole again (the header's `t`)."""
        return math.ceil((self.quota - self.tokens) * self.window_s / self.quota)

    def wait_s(self) -> int:
        """Seconds until one request fits again (at least 1)."""
        return max(1, math.ceil((1 - self.tokens) * self.window_s / self.quota))


class Quota:
    """All windows of one API key; a request is admitted only if every window has a token."""

    def __init__(self, now: float, quotas: dict[str, int]) -> None:
        self.buckets = {
            name: Bucket(quotas[name], length, float(quotas[name]), now) for name, length in WINDOWS
        }

    def _adjust(self, now: float, quotas: dict[str, int]) -> None:
        """Quotas changed by the admin API apply at once; tokens never exceed the new quota."""
        for name, bucket in self.buckets.items():
            bucket.refill(now)
            if bucket.quota != quotas[name]:
                bucket.quota = quotas[name]
                bucket.tokens = min(bucket.tokens, float(bucket.quota))

    def take(self, now: float, quotas: dict[str, int]) -> str | None:
        """Spend one request; returns None if admitted, else the name of the first exhausted window."""
        self._adjust(now, quotas)
        for name, bucket in self.buckets.items():
            if bucket.tokens < 1:
                return name
        for bucket in self.buckets.values():
            bucket.tokens -= 1
        return None

    def headers(self) -> dict[str, str]:
        live = ", ".join(f'"{n}";r={int(b.tokens)};t={b.reset_s()}' for n, b in self.buckets.items())
        policy = ", ".join(f'"{n}";q={b.quota};w={b.window_s}' for n, b in self.buckets.items())
        return {"RateLimit": live, "RateLimit-Policy": policy}

    def retry_after(self) -> int:
        """Seconds until every exhausted window has room for one more request."""
        return max((b.wait_s() for b in self.buckets.values() if b.tokens < 1), default=1)
