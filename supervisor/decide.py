"""The supervisor's decision: a pure function of this round's observation, the rounds before, the policy.

Level-triggered (docs/SUPERVISOR.md): every round decides from the whole picture, so a round that was killed,
skipped or run on another machine changes nothing. The rules (supervisor/rules/, one room each, with the
states each owns, its deadline and its look-back) run in the order of RULES and the first that has something
to say decides; nothing said: `none`, with what was seen.

Durations come from one clock, the supervisor's rounds: a node's timestamps are compared only with the
same node's (for equality), never with this clock; audit lines dated after this round are not evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules import alerts, boot, budget, idle, pool, recovery, release, slurm
from supervisor.rules.base import Rule, compute_since, minutes
from supervisor.rules.budget import spend

__all__ = ["RULES", "Policy", "Rule", "decide", "look_back_min", "spend"]

RULES: tuple[Rule, ...] = (
    release.RELEASING,
    release.FINISHED,
    budget.OVER_BUDGET,
    boot.FAILED_TO_START,
    boot.NEVER_STARTED,
    recovery.RECOVERY,
    slurm.SLURM_JOB,
    pool.TRIAL_ENDED,
    alerts.UNVERIFIED,
    release.JOB_ENDED,
    slurm.SLURM_QUEUE_EMPTY,
    idle.IDLE,
    alerts.UNREACHABLE,
    alerts.BLIND,
)

AnyRule = Rule | Callable[[Observation, Sequence[RoundRecord], Policy], Decision | None]


def look_back_min(policy: Policy, rules: Sequence[Rule] = RULES) -> float:
    """How far back a round reads its audit lines: the longest look-back a rule declares, plus two rounds."""
    return max(r.look_back_min(policy) for r in rules) + 2 * policy.interval_min


def decide(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy, rules: Sequence[AnyRule] = RULES
) -> Decision:
    """The first rule with something to say, else `none` with what was seen."""
    for rule in rules:
        decision = rule(obs, history, policy)
        if decision is not None:
            return decision
    if obs.nodes == 0:
        return Decision(
            "none", f"no compute up (phase {obs.phase}): nothing bills but storage", state="no_compute"
        )
    spent = "unknown" if obs.spent_usd is None else f"${obs.spent_usd:,.2f}"
    if obs.slurm_queue in ("queued", "unknown"):
        what = "a job waiting" if obs.slurm_queue == "queued" else "a job in a state trainstack does not know"
        return Decision(
            "none",
            f"slurm queue holds {what}: Slurm's, neither idle nor finished "
            f"(spent {spent}; the cap bounds it)",
            state="queued",
        )
    if obs.step is None:
        since = compute_since(obs, history)
        return Decision(
            "none",
            f"booting: no step yet, {minutes(obs.at - since)} of boot_timeout_min "
            f"{policy.boot_timeout_min:g}",
            state="booting",
        )
    return Decision(
        "none",
        f"training runs: step {obs.step}, spent {spent} at ${obs.usd_per_hour:,.2f}/h",
        state="training",
    )
