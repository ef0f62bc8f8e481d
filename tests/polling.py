"""One polling helper for tests that wait on other processes (servers, hosts, agents): a deadline, never a
fixed sleep standing in for "long enough".

A deadline only bounds how long a failing test takes to say so: waiting longer never lets a wrong answer
pass (`poll` returns at the first right one). So every deadline a test names is stretched by
TRAINSTACK_TEST_DEADLINE_SCALE (default 3, harness/deadlines.py): the figure in a test is what an idle
machine needs, and a CI machine with both cores busy must not turn a slow answer into a failure
(issue #31)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from harness.deadlines import SCALE, scaled

T = TypeVar("T")
__all__ = ["SCALE", "poll", "scaled"]


def poll(
    check: Callable[[], T | None],
    what: str,
    timeout_s: float,
    interval_s: float = 0.5,
    log: Callable[[], str] | None = None,
) -> T:
    """`check()`'s first truthy answer; fails naming `what` (and showing `log()`) when the deadline passes."""
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {scaled(timeout_s):g} s\n{log() if log else ''}")
        time.sleep(interval_s)
