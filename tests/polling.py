"""One polling helper for tests that wait on other processes (servers, hosts, agents): a deadline, never a
fixed sleep standing in for "long enough"."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(
    check: Callable[[], T | None],
    what: str,
    timeout_s: float,
    interval_s: float = 0.5,
    log: Callable[[], str] | None = None,
) -> T:
    """`check()`'s first truthy answer; fails naming `what` (and showing `log()`) when the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s\n{log() if log else ''}")
        time.sleep(interval_s)
