"""The one backoff rule: capped exponential delay with equal jitter, shared by the chokepoint and ssh."""

from __future__ import annotations

from common.backoff import Backoff


def test_delay_doubles_then_caps_with_equal_jitter() -> None:
    b = Backoff(base_s=0.25, cap_s=8.0)
    assert [b.delay(n, rng=lambda: 1.0) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert [b.delay(n, rng=lambda: 0.0) for n in (1, 6)] == [0.25, 4.0]  # never below half the step
