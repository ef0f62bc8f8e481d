"""decide() on a `scheduler: slurm` stack's queue (Observation.slurm_queue, supervisor/slurm.py
`queue_reading`): an empty queue is idle by its own rule, with idle's thresholds on the queue's own clock; a
job waiting, or in a state trainstack does not know, is Slurm's wait, never idle and never finished."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from supervisor.decide import Policy, decide
from supervisor.lifecycle import STATES
from supervisor.model import Decision, RoundRecord
from supervisor.rules.idle import threshold
from tests.supervisor.test_decide import FINISHED, obs

POLICY = Policy(cap_usd=0.0)  # idle_for_min 30, idle_grace_min 15, interval 5
# A Slurm cluster between jobs, seen by the supervisor: the last job's step stays, no GPU metrics, node 0
# answers (a cluster whose job never stepped is never_started's, at boot_timeout_min).
QUIET = {"gpu_util_max": None, "step": 100.0, "aggregator_round": None}


def rounds(readings: Sequence[str | None], **kw: object) -> list[Decision]:
    """One round every 5 min with these queue readings, each decided with the rounds before it (what was
    decided is what was done), until a release."""
    history: list[RoundRecord] = []
    out = []
    for i, reading in enumerate(readings):
        now = obs(i * 5.0, slurm_queue=reading, **{**QUIET, **kw})
        decision = decide(now, history, POLICY)
        out.append(decision)
        history.append(RoundRecord("slurm", now, decision, done=decision.actions))
        if "release" in decision.actions:
            break
    return out


def test_an_empty_queue_warns_at_idle_for_min_and_releases_after_the_grace() -> None:
    decisions = rounds(["running"] * 2 + ["empty"] * 20)
    first_empty = 2
    kinds = [(i * 5, d.kind, d.actions) for i, d in enumerate(decisions)]
    warned = next(i for i, d in enumerate(decisions) if "notify" in d.actions)
    released = next(i for i, d in enumerate(decisions) if "release" in d.actions)
    assert (warned - first_empty) * 5 == threshold(POLICY, "idle_for_min"), kinds
    assert (released - warned) * 5 == threshold(POLICY, "idle_grace_min"), kinds
    assert decisions[released].actions == ("sync", "release", "summary")
    assert decisions[released].kind == "idle" and decisions[released].state == "idle"
    since = "2027-01-15 08:10 UTC"  # T0 + 10 min: the first round that read the queue empty
    assert f"slurm queue empty: no job running or pending since {since}" in decisions[warned].reason
    assert all(d.state == "idle" for d in decisions[first_empty:]), kinds
    bound = STATES["idle"].deadline_min(POLICY)
    assert bound is not None and (released - first_empty) * 5 <= bound


@pytest.mark.parametrize("reading", ["queued", "unknown"])
def test_a_waiting_job_or_an_unknown_state_is_never_idle_nor_finished(reading: str) -> None:
    for kw in (QUIET, {"gpu_util_max": 0.0, "step": 100.0}):  # no metrics, or GPUs idle at a still step
        decisions = rounds([reading] * 30, **kw)
        assert len(decisions) == 30, [d.reason for d in decisions]  # nothing released in 2.5 h
        assert {d.kind for d in decisions} == {"none"} and {d.state for d in decisions} == {"queued"}
        assert "slurm queue holds" in decisions[-1].reason
    # a verified finished run while Slurm holds another job: the cluster is still the queue's
    held = decide(obs(0, slurm_queue=reading, runs=(FINISHED,)), [], POLICY)
    assert held.kind == "none" and held.state == "queued", held


def test_a_finished_run_on_an_empty_queue_is_released_at_once() -> None:
    done = decide(obs(0, slurm_queue="empty", runs=(FINISHED,)), [], POLICY)
    assert done.kind == "finished" and "release" in done.actions


def test_a_round_that_could_not_read_the_queue_starts_its_count_again() -> None:
    """No reading (the ssh cut, slurmctld not answering) is no word on the queue: never empty."""
    readings: list[str | None] = ["empty"] * 5 + [None] + ["empty"] * 5
    decisions = rounds(readings)
    assert not any("notify" in d.actions or "release" in d.actions for d in decisions)
    assert decisions[5].kind == "idle" and "GPU utilisation unknown" in decisions[5].reason, decisions[5]


def test_busy_gpus_on_an_empty_queue_are_not_the_queue_rule_s() -> None:
    busy = {"gpu_util_max": 0.9, "step": 100.0}
    decisions = rounds(["empty"] * 20, **busy)
    assert not any(d.reason.startswith("slurm queue empty") for d in decisions)
    assert not any("release" in d.actions for d in decisions)


def test_the_empty_queue_reason_follows_the_queue_not_the_compute() -> None:
    """Replace the first reading: the count starts at the first empty one."""
    now = obs(40.0, slurm_queue="empty", **QUIET)
    history = [
        RoundRecord("s", obs(m, slurm_queue=q, **QUIET), Decision("none", "x"))
        for m, q in ((0.0, "running"), (5.0, "queued"), (10.0, "empty"), (35.0, "empty"))
    ]
    decision = decide(now, history, POLICY)
    assert decision.kind == "idle" and "notify" in decision.actions, decision  # 30 min since minute 10
