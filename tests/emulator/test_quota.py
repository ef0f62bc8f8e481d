"""Issue #62: the local RunPod's quotas hold in any window, on an injected clock (no server, no sleep)."""

from __future__ import annotations

import bisect

from emulator.quota import Quota

QUOTAS = {"minute": 10_000, "hour": 3000, "day": 1_000_000}  # the hour window alone binds


def _admitted(every_s: float, span_s: float) -> list[float]:
    """A client asking every `every_s` seconds for `span_s` seconds: the times it was let through."""
    quota, times = Quota(0.0, QUOTAS), []
    for i in range(int(span_s / every_s)):
        now = 1_000.0 + i * every_s
        if quota.take(now, QUOTAS) is None:
            times.append(now)
    return times


def _most_in_any_window(times: list[float], window_s: float) -> int:
    return max(bisect.bisect_left(times, t + window_s) - i for i, t in enumerate(times))


def test_no_hour_holds_more_than_the_hourly_quota() -> None:
    """The old bucket started each window full and refilled the quota per window: ~2x the quota in an hour
    (3,100 requests in 57 minutes under 3,000/h)."""
    times = _admitted(0.5, 3 * 3600)  # twice the hour's pace, for three hours
    assert _most_in_any_window(times, 3600) <= QUOTAS["hour"]
    # ... and not much stricter: the quota each hour, less at most one slot's worth.
    assert len(times) >= 3 * QUOTAS["hour"] * 59 / 60


def test_a_refused_request_is_told_when_one_fits() -> None:
    quota, quotas = (
        Quota(0.0, {"minute": 5, "hour": 100, "day": 1000}),
        {"minute": 5, "hour": 100, "day": 1000},
    )
    for _ in range(5):
        assert quota.take(30.0, quotas) is None
    assert quota.take(30.0, quotas) == "minute"
    wait = quota.retry_after()
    assert quota.take(30.0 + wait - 1, quotas) == "minute"
    assert quota.take(30.0 + wait, quotas) is None
    assert quota.headers()["RateLimit"].startswith('"minute";r=4;')  # five admitted in the last minute
