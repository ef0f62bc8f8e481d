"""harness/storm.py's pure parts and its clock, as plain calls (the storm itself, as root on emulated hosts,
is tests/hosts/test_storm.py): the readers of a start script's log and of node 0's progress, the most clusters
alive together from the emulator's audit, and RoundClock's rounds: the emulator's clock moved by the
supervisor's interval before each, a round of training only once the job stepped on, and a round that
failed or released before the last step stopping the scenario with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from harness.storm import (
    INTERVAL_S,
    RoundClock,
    Storm,
    StormFailed,
    clusters_at_once,
    first_step,
    first_steps,
    losses,
)


def test_first_steps_read_each_job_start_of_a_log() -> None:
    log = "boot\nfirst step 0\nstep 10 loss 1.0\nrestart\nfirst step 120\nfirst step 240\n"
    assert first_step(log) == 0
    assert first_steps(log) == [0, 120, 240]
    assert first_step("boot only\n") is None and first_steps("") == []
    assert first_steps("  first step 5\n") == []  # only at a line's start, as the start script prints it


def test_losses_by_step_skip_lines_without_a_loss() -> None:
    lines: list[dict[str, Any]] = [
        {"step": 10, "loss": 2.5},
        {"step": 20},
        {"loss": 1.0},
        {"step": "30", "loss": "0.5"},
        {"step": 40, "loss": None},
    ]
    assert losses(lines) == {10: 2.5, 30: 0.5}


def test_clusters_at_once_counts_creates_against_deletes_in_order() -> None:
    def entry(event: str, rid: str, kind: str = "cluster") -> dict[str, Any]:
        return {"kind": kind, "event": event, "resourceId": rid}

    replaced_in_order = [
        entry("cluster.create", "a"),
        entry("pod.create", "p", kind="pod"),
        entry("cluster.delete", "a"),
        entry("cluster.create", "b"),
    ]
    assert clusters_at_once(replaced_in_order) == 1
    overlapping = [entry("cluster.create", "a"), entry("cluster.create", "b"), entry("cluster.delete", "a")]
    assert clusters_at_once(overlapping) == 2
    assert clusters_at_once([]) == 0


@dataclass
class _Decision:
    kind: str
    reason: str = "why"


@dataclass
class _Record:
    decision: _Decision
    done: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass
class _Admin:
    moved: list[float] = field(default_factory=list)

    def advance(self, seconds: float) -> None:
        self.moved.append(seconds)

    def now(self) -> float:
        """The emulator's clock: where the fake has moved it (a round notes its start, harness/storm.py)."""
        return sum(self.moved)


@dataclass
class _Storm:
    """What RoundClock reads of a Storm: the aggregator's step, the emulator's clock, the logs."""

    steps: list[float | None]
    admin: _Admin = field(default_factory=_Admin)

    def agg_step(self) -> float | None:
        return self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]

    def logs(self) -> str:
        return "the nodes' logs"


def _clock(storm: _Storm, records: list[_Record], finished: bool = False) -> RoundClock:
    return RoundClock(cast(Storm, storm), lambda: records.pop(0), 100, lambda: finished, [])


def test_a_round_of_training_waits_for_its_steps_then_moves_the_clock() -> None:
    storm = _Storm(steps=[50.0, 149.0, 150.0])  # 50 before the round, 150 wanted
    clock = _clock(storm, [_Record(_Decision("healthy"))])
    assert clock.tick() == ("healthy", (), "why")
    assert storm.steps == [150.0]  # it read on until the job reached step 150
    assert storm.admin.moved == [INTERVAL_S]
    assert clock.rounds == [("healthy", ())] and clock.lines[-1].startswith("round 1: ")


def test_a_round_without_training_and_a_stride_move_the_clock_at_once() -> None:
    storm = _Storm(steps=[None])  # no step ever: a round that waited for one would time out
    clock = _clock(storm, [_Record(_Decision("healthy")), _Record(_Decision("healthy"))])
    clock.tick(wait_for_progress=False)
    clock.tick(wait_for_progress=False, extra_s=3600)
    assert storm.admin.moved == [INTERVAL_S, INTERVAL_S + 3600]


def test_ticks_until_returns_the_acting_rounds_reason_or_names_what_never_came() -> None:
    records = [
        _Record(_Decision("healthy")),
        _Record(_Decision("stalled", "no step for 20 min")),  # decided, not yet acted on
        _Record(_Decision("stalled", "no step for 25 min"), done=("recover",)),
    ]
    clock = _clock(_Storm(steps=[None]), records)
    assert clock.ticks_until("stalled", 3, wait_for_progress=False) == "no step for 25 min"
    never = _clock(_Storm(steps=[None]), [_Record(_Decision("healthy")), _Record(_Decision("healthy"))])
    with pytest.raises(StormFailed, match="no node_lost round in 2 rounds"):
        never.ticks_until("node_lost", 2, wait_for_progress=False)


def test_a_failed_round_or_a_release_before_the_last_step_stops_the_scenario() -> None:
    failed = _clock(_Storm(steps=[None]), [_Record(_Decision("healthy"), errors=("pulumi up: exit 1",))])
    with pytest.raises(StormFailed, match=r"round failed.*pulumi up: exit 1"):
        failed.tick(wait_for_progress=False)
    early = _clock(_Storm(steps=[None]), [_Record(_Decision("over_budget", "cap"), done=("release",))])
    with pytest.raises(StormFailed, match="released the run before its last step: over_budget: cap"):
        early.tick(wait_for_progress=False)
    done = _clock(_Storm(steps=[None]), [_Record(_Decision("finished"), done=("release",))], finished=True)
    assert done.tick() == ("finished", ("release",), "why")  # a finished job needs no more steps
