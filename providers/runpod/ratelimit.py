"""Client-side pacing: the process-wide token bucket and the backoff schedule used for retries."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from providers import settings
from providers.runpod.errors import ConfigError

Clock = Callable[[], float]
Sleep = Callable[[float], None]

# RunPod's published example quota is 60/min, 3000/h, 50000/day per user (openapi-v2 RateLimit-Policy).
DEFAULT_RATE_PER_MIN = 60
RATE_ENV = "RUNPOD_RATE_LIMIT_PER_MIN"


class TokenBucket:
    """A thread-safe token bucket that never lets more than `rate_per_min` requests into any 60 s window.

    A plain bucket of capacity B refilled at R/min admits B + R in a minute. We refill at (R - B)/min
    instead, so a full burst plus a minute of refill is exactly R. The Pulumi dynamic-provider process
    serves resources from a thread pool, so all provider calls in one process share one bucket.
    """

    def __init__(
        self,
        rate_per_min: int,
        *,
        burst: int | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        if rate_per_min < 1:
            raise ConfigError(f"{RATE_ENV} must be a positive integer")
        self.capacity = float(burst if burst is not None else max(1, min(5, rate_per_min // 6)))
        self.capacity = min(self.capacity, float(rate_per_min))
        refill_per_min = max(rate_per_min - self.capacity, 1.0)
        self._per_s = refill_per_min / 60.0
        self._tokens = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self._per_s)
        self._stamp = now

    def acquire(self) -> float:
        """Take one token, sleeping until one is available; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= 1.0 - 1e-9:  # tolerance: float refills land a hair short of 1
                    self._tokens = max(self._tokens - 1.0, 0.0)
                    return waited
                # at least 1 ms, so a fake clock at a large value always moves forward
                wait = max((1.0 - self._tokens) / self._per_s, 0.001)
            self._sleep(wait)
            waited += wait

    def drain(self) -> None:
        """Empty the bucket, e.g. after the server said the minute window is used up."""
        with self._lock:
            self._refill()
            self._tokens = min(self._tokens, 0.0)


_SHARED: dict[int, TokenBucket] = {}
_SHARED_LOCK = threading.Lock()


def shared_bucket() -> TokenBucket:
    """The bucket shared by every client in this process (real clock), built on first use."""
    rate = settings.current().rate_limit_per_min
    with _SHARED_LOCK:
        if rate not in _SHARED:
            _SHARED[rate] = TokenBucket(rate)
        return _SHARED[rate]


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with equal jitter: delay in [d/2, d], d = min(cap, base * 2**n)."""

    base_s: float = 1.0
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        d = min(self.cap_s, self.base_s * (2 ** min(attempt, 20)))
        return float(d / 2 + rng() * d / 2)
