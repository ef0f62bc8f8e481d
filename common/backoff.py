"""The one backoff rule for every retry loop (RunPod chokepoint, ssh/scp to nodes); standard library only."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with equal jitter: delay in [d/2, d], d = min(cap, base * 2**n)."""

    base_s: float = 1.0
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        d = min(self.cap_s, self.base_s * (2 ** min(attempt, 20)))
        return float(d / 2 + rng() * d / 2)
