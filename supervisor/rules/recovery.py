"""Recovery (supervisor/recover.py, docs/RECOVERY.md): a failed job, a lost, unhealthy or preempted node, a
stall: restart or replace through Pulumi, bounded by max_recoveries with a doubling backoff; or gave up:
release (a pool's trial: its pod alone)."""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State
from supervisor.rules.recovery_plan import recovery


def _decide(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    return recovery(obs, history, policy)


def deadline_min(p: Policy) -> float:
    """The backoffs of max_recoveries attempts, a round each, then gave_up's release."""
    rc = p.recovery
    return rc.backoff_min * ((1 << max(0, rc.max_recoveries)) - 1) + (rc.max_recoveries + 1) * p.interval_min


def look_back_min(p: Policy) -> float:
    """The straggler's window and the stall's threshold, with a round either side."""
    rc = p.recovery
    return max(rc.straggler_for_min, rc.hang_after_min) + 2 * p.interval_min


RECOVERY = Rule(
    "recovery",
    _decide,
    ("recovering", "failed", "trial_ended"),
    deadline_min,
    look_back_min=look_back_min,
    history=("audit", "attempts", "notices"),
)

STATES = (
    State(
        "recovering",
        "restart or replace through Pulumi, at most max_recoveries a run (the nodes' own restarts "
        "counted too), backoff doubling",
        deadline_min,
        "the backoffs of max_recoveries attempts, then gave_up releases",
    ),
)
