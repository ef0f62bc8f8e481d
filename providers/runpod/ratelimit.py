"""Client-side pacing: the process-wide token bucket and the backoff schedule used for retries."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from facts.limits import RATE_PER_DAY, RATE_PER_HOUR, RATE_PER_MINUTE
from providers import settings
from providers.runpod.errors import RunPodSettingsError

Clock = Callable[[], float]
Sleep = Callable[[float], None]

RATE_ENV = "RUNPOD_RATE_LIMIT_PER_MIN"
HOUR_ENV = "RUNPOD_RATE_LIMIT_PER_HOUR"
DAY_ENV = "RUNPOD_RATE_LIMIT_PER_DAY"
# The window names RunPod's RateLimit header uses, and their lengths in seconds.
WINDOW_S = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}


class _Window:
    """One window's bucket: never more than `quota` requests in any `length_s` span.

    A plain bucket of capacity B refilled at Q per window admits B + Q in one window. We refill at
    (Q - B) per window instead, so a full burst plus a window of refill is exactly Q.
    """

    def __init__(self, name: str, quota: int, length_s: float, burst: int, now: float) -> None:
        self.name = name
        self.capacity = float(min(burst, quota))
        self.per_s = max(quota - self.capacity, 1.0) / length_s
        self.tokens = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.per_s)
        self.stamp = now

    def wait_s(self) -> float:
        return max((1.0 - self.tokens) / self.per_s, 0.0)


class TokenBucket:
    """A thread-safe limiter that keeps every window (minute, and hour/day when given) under its quota.

    The Pulumi dynamic-provider process serves resources from a thread pool, so all provider calls in
    one process share one limiter. A request takes a token from every window at once; the wait is the
    longest any window needs. Bursts: at most 5 (a tenth of a minute's quota) in the minute window, a
    minute's quota in the hour window and half the quota in the day window, so a long `up` settles at
    the hour window's pace (3000/h is 50/min, below the minute's 60) instead of meeting its 429.
    """

    def __init__(
        self,
        rate_per_min: int,
        *,
        burst: int | None = None,
        per_hour: int | None = None,
        per_day: int | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        for name, value in ((RATE_ENV, rate_per_min), (HOUR_ENV, per_hour), (DAY_ENV, per_day)):
            if value is not None and value < 1:
                raise RunPodSettingsError(f"{name} must be a positive integer")
        self._clock = clock
        self._sleep = sleep
        now = clock()
        minute_burst = burst if burst is not None else max(1, min(5, rate_per_min // 6))
        self._windows = [_Window("minute", rate_per_min, WINDOW_S["minute"], minute_burst, now)]
        if per_hour is not None:
            self._windows.append(_Window("hour", per_hour, WINDOW_S["hour"], rate_per_min, now))
        if per_day is not None:
            # Half the day up front: a day bucket with a small burst would hold every run to the day's
            # average (50000/day is ~2080/h), well under the 3000/h a few hours' `up` may use.
            self._windows.append(_Window("day", per_day, WINDOW_S["day"], per_day // 2, now))
        self.capacity = self._windows[0].capacity
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token from every window, sleeping until all have one; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                for window in self._windows:
                    window.refill(now)
                # tolerance: float refills land a hair short of 1
                if all(w.tokens >= 1.0 - 1e-9 for w in self._windows):
                    for window in self._windows:
                        window.tokens = max(window.tokens - 1.0, 0.0)
                    return waited
                # at least 1 ms, so a fake clock at a large value always moves forward
                wait = max(max(w.wait_s() for w in self._windows), 0.001)
            self._sleep(wait)
            waited += wait

    def drain(self, window: str = "minute") -> None:
        """Empty one window, e.g. after the server's RateLimit header said it is used up."""
        with self._lock:
            now = self._clock()
            for each in self._windows:
                if each.name == window:
                    each.refill(now)
                    each.tokens = min(each.tokens, 0.0)


_SHARED: dict[tuple[int, int, int], TokenBucket] = {}
_SHARED_LOCK = threading.Lock()


def shared_bucket() -> TokenBucket:
    """The limiter shared by every client in this process (real clock), built on first use."""
    knobs = settings.current()
    minute = knobs.rate_limit_per_min
    # Unset hour/day quotas keep the spec example's ratio to the minute quota (3000/60, 50000/60), so a
    # raised minute quota (tests against the local RunPod) is not capped by windows nobody set.
    hour = knobs.rate_limit_per_hour or math.ceil(minute * RATE_PER_HOUR / RATE_PER_MINUTE)
    day = knobs.rate_limit_per_day or math.ceil(minute * RATE_PER_DAY / RATE_PER_MINUTE)
    rates = (minute, hour, day)
    with _SHARED_LOCK:
        if rates not in _SHARED:
            _SHARED[rates] = TokenBucket(rates[0], per_hour=rates[1], per_day=rates[2])
        return _SHARED[rates]
