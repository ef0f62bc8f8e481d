"""The supervisor's decision: a pure function of this round's observation, the rounds before, the policy.

Level-triggered (docs/SUPERVISOR.md): every round decides from the whole picture, so a round that was killed,
skipped or run on another machine changes nothing. The rules run in order and the first that has something
to say decides; a new decision (recovery, issue #29) is one more `Rule` in `RULES`:

    releasing    the phase says released but compute is still there: finish that release
    finished     every job's run state says finished and verifies against the bucket: release
    over_budget  at the cap: sync and release; past warn_at of it: one warning
    recovery     (issue #29, supervisor/recover.py, docs/RECOVERY.md) a failed job, a lost, unhealthy or
                 preempted node, a stall: restart or replace through Pulumi, bounded; or gave up: release
    idle         GPUs idle with no new step (or the job exited non-zero) for idle_for_min: one warning,
                 then after idle_grace_min a last sync and release
    unverified   a run state says finished but does not verify (forged or torn): one alert, no release
    blind        neither node 0 nor billing answer for blind_for_min: one alert, never an action
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stackconfig.supervisor import RecoveryConfig, SupervisorConfig
from supervisor.model import Decision, Kind, Observation, RoundRecord, newest_first


@dataclass(frozen=True)
class Policy:
    """The thresholds, in the config's units, and the run's cost cap (USD, 0: none)."""

    interval_min: float = 5.0
    idle_util_pct: float = 10.0
    idle_for_min: float = 30.0
    idle_grace_min: float = 15.0
    warn_at: float = 0.8
    blind_for_min: float = 15.0
    cap_usd: float = 0.0
    # issue #29: off unless given; scripts/supervise passes the stack's trainstack:recovery
    recovery: RecoveryConfig = field(default_factory=lambda: RecoveryConfig(enabled=False))

    @classmethod
    def of(cls, config: SupervisorConfig, cap_usd: float, recovery: RecoveryConfig | None = None) -> Policy:
        return cls(
            interval_min=config.interval_min,
            idle_util_pct=config.idle_util_pct,
            idle_for_min=config.idle_for_min,
            idle_grace_min=config.idle_grace_min,
            warn_at=config.warn_at,
            blind_for_min=config.blind_for_min,
            cap_usd=cap_usd,
            recovery=recovery or RecoveryConfig(enabled=False),
        )


Rule = Callable[[Observation, Sequence[RoundRecord], Policy], Decision | None]


def _min(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def _notified(history: Sequence[RoundRecord], kind: Kind, since: float) -> float | None:
    """When a message of this kind was last sent at or after `since` (None: not in that time)."""
    for record in newest_first(history):
        if record.observation.at < since:
            break
        if record.decision.kind == kind and "notify" in record.done:
            return record.observation.at
    return None


def releasing(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.phase not in ("active", "recovering") and obs.nodes > 0:  # recovering: supervisor/recover.py
        return Decision(
            "releasing",
            f"trainstack:run.phase is {obs.phase} but {obs.nodes} node(s) remain: finishing that release",
            ("release", "summary"),
        )
    return None


def finished(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    runs = obs.runs
    if obs.nodes == 0 or not runs or not all(r.status == "finished" and r.verified for r in runs):
        return None
    steps = ", ".join(f"{r.run_id} at step {r.last_step}" for r in runs)
    return Decision(
        "finished",
        f"run finished and its final checkpoint verifies in the bucket ({steps}): releasing compute",
        ("release", "summary"),
    )


def over_budget(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    cap, spent = policy.cap_usd, obs.spent_usd
    if cap <= 0 or spent is None or obs.nodes == 0:
        return None
    # Release before the next round would cross the cap: what one more interval at today's price adds.
    next_round = spent + obs.usd_per_hour * policy.interval_min / 60
    if next_round >= cap:
        return Decision(
            "over_budget",
            f"spent ${spent:,.2f} of the ${cap:,.2f} cap and the next {policy.interval_min:g} min "
            "would reach it: syncing the newest checkpoint and releasing compute",
            ("sync", "release", "summary"),
        )
    if spent >= policy.warn_at * cap:
        if _notified(history, "over_budget", since=0.0) is not None:
            return None  # warned once; the release comes at the cap
        text = (
            f"spent ${spent:,.2f}, {spent / cap:.0%} of the run's ${cap:,.2f} cap "
            f"(${obs.usd_per_hour:,.2f}/h): compute is released at the cap"
        )
        return Decision("over_budget", text, ("notify",), text)
    return None


def _idle_now(obs: Observation, policy: Policy) -> str | None:
    """Why this round looks idle, or None."""
    failed = [r for r in obs.runs if r.status == "failed"]
    if failed:
        return f"training exited with status {failed[0].exit_status} ({failed[0].run_id})"
    if obs.nodes == 0 or obs.node0_reachable is not True:
        return None
    # A step to compare across rounds, and GPUs that are not busy: low, or unknown (no NVML on the node).
    # GPUs reading busy are never idle, even at a stalled step (a run this supervisor cannot judge).
    if obs.step is not None and obs.gpu_util_max is None:
        return "GPU utilisation unknown (no GPU metrics)"
    if (
        obs.step is not None
        and obs.gpu_util_max is not None
        and obs.gpu_util_max * 100 < policy.idle_util_pct
    ):
        return f"GPU utilisation at most {obs.gpu_util_max:.0%} (under {policy.idle_util_pct:g}%)"
    if obs.aggregator_age_s is not None and obs.aggregator_age_s >= policy.idle_for_min * 60:
        return f"node 0 answers but its aggregator's last round is {_min(obs.aggregator_age_s)} old"
    return None


def idle(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    why = _idle_now(obs, policy)
    if why is None:
        return None
    # The episode: this round and the rounds just before it that were idle at the same step.
    start = obs.at
    for record in newest_first(history):
        past = record.observation
        if past.at > obs.at or _idle_now(past, policy) is None or past.step != obs.step:
            break
        start = past.at
    lasted = obs.at - start
    if lasted < policy.idle_for_min * 60:
        return Decision("idle", f"{why} for {_min(lasted)} (acts at {policy.idle_for_min:g} min)")
    warned = _notified(history, "idle", since=start)
    if warned is None:
        text = (
            f"{why} for {_min(lasted)} with no new step (step {obs.step}): compute is released in "
            f"{policy.idle_grace_min:g} min unless training resumes"
        )
        return Decision("idle", text, ("notify",), text)
    if obs.at - warned < policy.idle_grace_min * 60:
        return Decision("idle", f"{why}; warned {_min(obs.at - warned)} ago, release after the grace")
    return Decision(
        "idle",
        f"{why} for {_min(lasted)}, {_min(obs.at - warned)} after the warning: syncing and releasing compute",
        ("sync", "release", "summary"),
    )


def unverified(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    bad = [r for r in obs.runs if r.status == "finished" and not r.verified]
    if not bad or obs.nodes == 0:
        return None
    reason = f"run state of {bad[0].run_id} says finished but does not verify: {bad[0].why}; not releasing"
    if _notified(history, "unverified", since=0.0) is not None:
        return Decision("unverified", reason)
    return Decision("unverified", reason, ("notify",), f"ALERT: {reason}")


def blind(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if not obs.blind:
        return None
    start = obs.at
    for record in newest_first(history):
        if record.observation.at > obs.at or not record.observation.blind:
            break
        start = record.observation.at
    lasted = obs.at - start
    reason = f"no SSH to node 0 and no RunPod billing for {_min(lasted)}: not acting blind"
    if lasted < policy.blind_for_min * 60 or _notified(history, "blind", since=start) is not None:
        return Decision("blind", reason)
    return Decision("blind", reason, ("notify",), f"ALERT: {reason}; look at the stack by hand")


def _recovery(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    from supervisor.recover import recovery  # issue #29: its own module (it imports this one's Policy)

    return recovery(obs, history, policy)


RULES: tuple[Rule, ...] = (releasing, finished, over_budget, _recovery, idle, unverified, blind)


def decide(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy, rules: Sequence[Rule] = RULES
) -> Decision:
    """The first rule with something to say, else `none` with what was seen."""
    for rule in rules:
        decision = rule(obs, history, policy)
        if decision is not None:
            return decision
    if obs.nodes == 0:
        return Decision("none", f"no compute up (phase {obs.phase}): nothing bills but storage")
    spent = "unknown" if obs.spent_usd is None else f"${obs.spent_usd:,.2f}"
    return Decision("none", f"training runs: step {obs.step}, spent {spent} at ${obs.usd_per_hour:,.2f}/h")
