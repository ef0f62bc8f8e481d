"""How long a wait on another process may take before it is called a failure, on this machine.

A deadline only bounds how long a failure takes to say so: waiting longer never lets a wrong answer pass (a
poll returns at the first right one). So every deadline a test or a scenario names (tests/polling.py,
bench/storm.py) is what an idle machine needs, stretched by TRAINSTACK_TEST_DEADLINE_SCALE (default 3): a
CI machine with both cores busy must not turn a slow answer into a failure."""

from __future__ import annotations

import os

ENV = "TRAINSTACK_TEST_DEADLINE_SCALE"


def scale() -> float:
    return float(os.environ.get(ENV) or 3)


SCALE = scale()


def scaled(seconds: float) -> float:
    """`seconds` (what an idle machine needs) times the scale."""
    return seconds * SCALE
