"""A run's lifecycle as one state machine: every state a run can be in, the rule of
supervisor/decide.py that owns it, its deadline and what it may bill before that rule acts.

    no_compute -> booting -first step-> training -run state-> finished -> released
                     |                  | \\-stall, lost, unhealthy-> recovering -> training
                     |                  |                              \\-budget spent-> gave_up -> released
                     |                  \\-GPUs idle, no step-> idle -grace-> released
                     \\-exit record, boot_timeout-> failed -> released

A `scheduler: slurm` stack whose queue holds a job waiting (or one in a state trainstack does not know) is
`queued`: Slurm's wait, never idle; an empty queue is `idle` (decide.py's `slurm_queue_empty`).
A pool's trial that ends while others run is `trial_ended`: its pod alone is released.
`unreachable` (no SSH: no key, or the network) and `unverified` (a finished state that does not verify) can
happen in any state with compute; `over_budget` releases from any of them. The deadlines are in minutes from
the first round at which no useful work is possible, with the policy's defaults; `worst_usd` prices them.
docs/SUPERVISOR.md draws the same table; tests/supervisor/test_lifecycle_properties.py holds the deadlines
on generated runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisor.decide import Policy


@dataclass(frozen=True)
class StateSpec:
    owner: str  # the rule of decide.py that acts on it
    acts: str  # what that rule does
    deadline_min: Callable[[Policy], float | None]  # None: no deadline of its own (the cap is its bound)
    bound: str  # the deadline in words


def _one_round(p: Policy) -> float:
    return p.interval_min


STATES: dict[str, StateSpec] = {
    "no_compute": StateSpec("(none)", "nothing bills but storage", lambda _p: 0.0, "nothing to release"),
    "booting": StateSpec(
        "never_started",
        "release when no step came boot_timeout_min (+ burn_in_min) after the compute came up",
        lambda p: p.boot_timeout_min + p.interval_min,
        "boot_timeout_min + burn_in_min + one round, from the compute's first round",
    ),
    "training": StateSpec(
        "over_budget",
        "nothing while it steps; a warning at warn_at of the cap, release before the cap",
        lambda _p: None,
        "the cap (run.max_cost_usd)",
    ),
    "failed": StateSpec(
        "failed_to_start / job_ended / recovery",
        "one message with the exit record's reason and log tail, release (a failed health gate: replace)",
        _one_round,
        "one round after the exit record or failed run state is written",
    ),
    "finished": StateSpec(
        "finished", "release and a summary", _one_round, "one round after the verified run state"
    ),
    "idle": StateSpec(
        "idle / slurm_queue_empty",
        "one warning at idle_for_min, release idle_grace_min later",
        # Two thresholds, each met at the first round at or past it: a round late by seconds slips one.
        lambda p: p.idle_for_min + p.idle_grace_min + 2 * p.interval_min,
        "idle_for_min + idle_grace_min + two rounds",
    ),
    "queued": StateSpec(
        "over_budget / never_started",
        "a Slurm job waits in the queue, or is in a state not known: Slurm's, neither idle nor finished",
        lambda _p: None,
        "the cap (run.max_cost_usd); never_started's boot_timeout_min while no step ever came",
    ),
    "recovering": StateSpec(
        "recovery",
        "restart or replace through Pulumi, at most max_recoveries a run, backoff doubling",
        lambda p: (
            p.recovery.backoff_min * (2 ** max(0, p.recovery.max_recoveries) - 1)
            + (p.recovery.max_recoveries + 1) * p.interval_min
        ),
        "the backoffs of max_recoveries attempts, then gave_up releases",
    ),
    "unreachable": StateSpec(
        "unreachable / blind",
        "one alert; never a replace; billing, RunPod and the bucket still decide (finished, lost, the cap)",
        lambda _p: None,
        "the cap, or the bucket's finished state, or RunPod stopping the pod",
    ),
    "unverified": StateSpec(
        "unverified",
        "one alert; never a release (the pod may hold the only good checkpoint)",
        lambda _p: None,
        "the cap; a person decides",
    ),
    "trial_ended": StateSpec(
        "trial_ended / failed_to_start / never_started / gave_up",
        "a pool's trial ended while others run: one message, its pod alone released (run.ended_trials)",
        _one_round,
        "one round after the trial's own state (finished, failed, never started, given up)",
    ),
    "releasing": StateSpec("releasing", "finish the release", _one_round, "one round"),
    "over_budget": StateSpec(
        "over_budget", "sync and release", _one_round, "released before the next round reaches the cap"
    ),
}
