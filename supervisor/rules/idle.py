"""Idle GPUs: compute that bills while nothing trains.

    idle   GPUs idle (under idle_util_pct, or no GPU metrics) with no new step, or a stale aggregator, for
           idle_for_min: one warning, then after idle_grace_min a last sync and release. Never on a Slurm
           stack whose queue holds a job pending or in a state trainstack does not know (Slurm's wait)

Its thresholds are trainstack:supervisor's idle_util_pct, idle_for_min and idle_grace_min. stackconfig
validates a value a stack sets; their defaults are declared here, once (`DEFAULTS`): a field left unset is
None in the config and resolved by `threshold` below, so changing a default touches this file and its test
(docs/SUPERVISOR.md's figures are checked against `DEFAULTS` by tests/test_docs_defaults.py). The deadline
below is the only arithmetic on them (supervisor/lifecycle.py, docs/SUPERVISOR.md's table and the round's
history window read it from here). slurm.py's `slurm_queue_empty` releases through `idle_release` on the same
thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, earlier, minutes, notified, under
from supervisor.slurm import outcome

IdleKey = Literal["idle_util_pct", "idle_for_min", "idle_grace_min"]

# The idle rule's defaults: GPU utilisation under 10 % with no new step for 30 min is idle; one warning, then
# a release 15 min later.
DEFAULTS: dict[IdleKey, float] = {"idle_util_pct": 10.0, "idle_for_min": 30.0, "idle_grace_min": 15.0}


def threshold(policy: Policy, key: IdleKey) -> float:
    """The stack's value of one idle threshold, or this rule's default where the stack leaves it unset."""
    value: float | None = getattr(policy.supervisor, key)
    return DEFAULTS[key] if value is None else value


def _slurm_wait(obs: Observation) -> bool:
    """A Slurm stack whose queue, or whose own job, waits or is in a state not known: Slurm's wait."""
    own = outcome(obs.slurm_state) if obs.slurm_state else None
    return obs.slurm_queue in ("queued", "unknown") or own in ("queued", "unknown")


def _idle_sign(obs: Observation, policy: Policy) -> str | None:
    """This round's own sign of idling: a step to compare across rounds, and GPUs that are not busy (low, or
    unknown: no NVML on the node). GPUs reading busy are never idle, even at a stalled step (a run this
    supervisor cannot judge)."""
    if obs.nodes == 0 or obs.node0_reachable is not True or _slurm_wait(obs):
        return None  # a Slurm job waiting (or in a state not known) is Slurm's wait, never idle
    util = threshold(policy, "idle_util_pct")
    if obs.step is not None and obs.gpu_util_max is None:
        return "GPU utilisation unknown (no GPU metrics)"
    if obs.step is not None and obs.gpu_util_max is not None and under(obs.gpu_util_max, util):
        return f"GPU utilisation at most {obs.gpu_util_max:.0%} (under {util:g}%)"
    return None


def _idle_now(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> tuple[str, float] | None:
    """Why this round looks idle and since when (the supervisor's clock), or None."""
    if obs.nodes == 0 or obs.node0_reachable is not True or _slurm_wait(obs):
        return None  # a Slurm job waiting (or in a state not known) is Slurm's wait, never idle
    why = _idle_sign(obs, policy)
    if why is not None:
        start = obs.at
        for past in earlier(obs, history):
            if past.step != obs.step or _idle_sign(past, policy) is None:
                break
            start = past.at
        if obs.gpu_util_max is None and start == obs.at:
            # Without GPU metrics the one sign of idling is a step that did not move since an earlier round:
            # a first round (a --dry-run) has none, and a training run is not "idle" for want of NVML.
            return None
        return why, start
    # The aggregator's own round stamp (its node's clock, compared only with itself) has not moved: it
    # stopped. A pool's is the newest of its pods' own aggregators (stackview/sources.py): stopped only when
    # every trial's has.
    if obs.aggregator_round is None:
        return None
    start = obs.at
    for past in earlier(obs, history):
        if past.aggregator_round != obs.aggregator_round:
            break
        start = past.at
    if start == obs.at:
        return None
    return f"node 0 answers but its aggregator's round has not moved for {minutes(obs.at - start)}", start


def idle(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    now = _idle_now(obs, history, policy)
    if now is None:
        return None
    why, start = now
    return idle_release(obs, history, policy, why, start, f"with no new step (step {obs.step})")


def idle_release(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy, why: str, start: float, detail: str
) -> Decision:
    """Idle since `start`: nothing before idle_for_min, then one warning, then after idle_grace_min a last
    sync and release (`detail`: what the warning says is missing)."""
    idle_for, grace = threshold(policy, "idle_for_min"), threshold(policy, "idle_grace_min")
    lasted = obs.at - start
    if lasted < idle_for * 60:
        return Decision("idle", f"{why} for {minutes(lasted)} (acts at {idle_for:g} min)", state="idle")
    warned = notified(history, "idle", since=start, before=obs.at)
    if warned is None:
        text = (
            f"{why} for {minutes(lasted)} {detail}: compute is released in "
            f"{grace:g} min unless training resumes"
        )
        return Decision("idle", text, ("notify",), text, state="idle")
    if obs.at - warned < grace * 60:
        return Decision(
            "idle", f"{why}; warned {minutes(obs.at - warned)} ago, release after the grace", state="idle"
        )
    return Decision(
        "idle",
        f"{why} for {minutes(lasted)}, {minutes(obs.at - warned)} after the warning: syncing and releasing "
        "compute",
        ("sync", "release", "summary"),
        state="idle",
    )


def deadline_min(p: Policy) -> float:
    """Two thresholds, each met at the first round at or past it: a round late by seconds slips one."""
    return threshold(p, "idle_for_min") + threshold(p, "idle_grace_min") + 2 * p.interval_min


IDLE = Rule("idle", idle, ("idle",), deadline_min, look_back_min=deadline_min, history=("audit",))

STATES = (
    State(
        "idle",
        "one warning at idle_for_min, release idle_grace_min later",
        deadline_min,
        "idle_for_min + idle_grace_min + two rounds",
    ),
)
