"""Shared listings (one GET for concurrent callers, never older than the call) and the poll schedule."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from providers.runpod.base import wait_for
from providers.runpod.listing import SharedListing


def test_callers_during_a_listing_share_the_next_one() -> None:
    listing: SharedListing[int] = SharedListing()
    gate, entered, calls = threading.Event(), threading.Event(), []

    def slow() -> int:
        calls.append(1)
        if len(calls) == 1:
            entered.set()
            gate.wait(5)
        return len(calls)

    first: list[int] = []
    leader = threading.Thread(target=lambda: first.append(listing.get(slow)))
    leader.start()
    entered.wait(5)
    late: list[int] = []
    followers = [threading.Thread(target=lambda: late.append(listing.get(slow))) for _ in range(5)]
    for t in followers:
        t.start()
    time.sleep(0.05)
    gate.set()
    for t in [leader, *followers]:
        t.join(5)
    # The leader's listing started before the others asked: they get one fresh listing between them.
    assert first == [1] and late == [2] * 5 and len(calls) == 2


def test_a_later_call_never_reuses_an_old_listing() -> None:
    listing: SharedListing[int] = SharedListing()
    counter = iter(range(10))
    assert listing.get(lambda: next(counter)) == 0
    assert listing.get(lambda: next(counter)) == 1


class _Clock:
    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, list[float]()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_first_poll_waits_for_the_boot_floor_then_one_poll_per_interval(monkeypatch: Any) -> None:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "10")
    fake = _Clock()
    polls: list[float] = []

    def fetch() -> float:
        polls.append(fake.now)
        return fake.now

    wait_for(fake, fetch, lambda t: (t >= 225, None), 1200, "cluster", first_poll_s=30)  # type: ignore[arg-type]
    assert polls[0] == 30 and all(b - a == 10 for a, b in itertools.pairwise(polls))
    assert polls[-1] - 225 < 10  # seen at most one interval late
    assert len(polls) <= 225 / 10
