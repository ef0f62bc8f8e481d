"""The run's one cost cap (trainstack:run.max_cost_usd).

over_budget   the next round would reach the cap: sync and release; past warn_at of it, one warning.
              With billing unreadable the spend is bounded by the compute's age at the stack's price
"""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, compute_since, earlier, once, one_round


def spend(obs: Observation, history: Sequence[RoundRecord]) -> tuple[float | None, str]:
    """What the run has spent and where that figure comes from. Billing when it answers; otherwise an upper
    bound (the cap held only while billing could be read): the last bill read plus the time since
    at the stack's price, or the compute's age at that price (RunPod's creation time of the oldest pod, or
    the first round that saw it), whichever is larger."""
    if obs.spent_usd is not None:
        return obs.spent_usd, "billed"
    rate = obs.usd_per_hour / 3600
    bounds = []
    starts = [compute_since(obs, history)]
    if obs.created_at is not None:
        starts.append(obs.created_at)
    billed = [p for p in earlier(obs, history) if p.spent_usd is not None][:2]
    last: Observation | None = billed[0] if billed else None
    # One implausible reading alone is no evidence: the one before it bounds the spend.
    if last is not None and len(billed) == 2 and _implausible(last, billed[1]):
        last = billed[1]
    if last is not None and last.spent_usd is not None:
        bounds.append(last.spent_usd + (obs.at - last.at) * rate)
    if obs.nodes > 0:
        bounds.append((obs.at - min(starts)) * rate)
    if obs.spend_bound_usd is not None:  # persisted: the last bill read plus $/h since (supervisor/outage.py)
        bounds.append(obs.spend_bound_usd)
    return (max(bounds), "bounded (billing unreadable)") if bounds else (None, "unknown")


def over_budget(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    cap = policy.cap_usd
    spent, source = spend(obs, history)
    if cap <= 0 or spent is None or obs.nodes == 0:
        return None
    how = "" if source == "billed" else f" ({source}: at most)"
    # Release before the next round would cross the cap: what one more interval at today's price adds.
    interval = policy.interval_min
    next_round = spent + obs.usd_per_hour * interval / 60
    if next_round >= cap:
        jump = _jump(obs, history, interval) if source == "billed" else None
        if jump is not None:  # one reading of billing alone: the next round, or the compute's age, confirms
            return Decision(
                "over_budget",
                f"billing says ${spent:,.2f} of the ${cap:,.2f} cap, ${jump:,.2f} more than a round before "
                "at the stack's price allows: not releasing on one reading; the next round confirms",
                state="training",
            )
        return Decision(
            "over_budget",
            f"spent ${spent:,.2f}{how} of the ${cap:,.2f} cap and the next {interval:g} min "
            "would reach it: syncing the newest checkpoint and releasing compute",
            ("sync", "release", "summary"),
            state="over_budget",
        )
    warn_at = policy.supervisor.warn_at
    if spent >= warn_at * cap:
        text = (
            f"spent ${spent:,.2f}{how}, {spent / cap:.0%} of the run's ${cap:,.2f} cap "
            f"(${obs.usd_per_hour:,.2f}/h): compute is released at the cap"
        )
        warning = Decision("over_budget", text, ("notify",), text, state="training")
        warned = once(obs, f"over_budget:{warn_at:g}", warning, history)
        return warned if warned.actions else None  # warned once this run: the release comes at the cap
    return None


def _implausible(later: Observation, before: Observation, interval_min: float = 0.0) -> bool:
    """Billing rose by more than the stack's price allows between two readings (two rounds of slack, and a
    dollar): a glitch, or another stack's bill, until a second reading or source agrees."""
    if later.spent_usd is None or before.spent_usd is None:
        return False
    allowed = later.usd_per_hour * (later.at - before.at + 2 * max(interval_min, 5.0) * 60) / 3600
    return later.spent_usd - before.spent_usd > allowed + 1.0


def _jump(obs: Observation, history: Sequence[RoundRecord], interval_min: float) -> float | None:
    """How much billing rose since the round before, when that is more than three rounds at the stack's
    price could bill (a glitch, or a reading of another stack's bill) and no second source agrees: neither
    the round before (its bill put it within a round of the cap too) nor the compute's age at its price.
    None: the reading is plausible, or confirmed."""
    if obs.spent_usd is None:
        return None
    before = next((o for o in earlier(obs, history) if o.spent_usd is not None), None)
    if before is None or before.spent_usd is None or not _implausible(obs, before, interval_min):
        return None  # the first reading has nothing to compare with: the cap comes first
    rise = obs.spent_usd - before.spent_usd
    aged = (obs.at - min(compute_since(obs, history), obs.created_at or obs.at)) * obs.usd_per_hour / 3600
    if aged + obs.usd_per_hour * interval_min / 60 >= obs.spent_usd:
        return None  # the compute's age at its price bears the bill out: the nodes agree
    return rise


def _no_deadline(_p: Policy) -> float | None:
    return None


OVER_BUDGET = Rule(
    "over_budget", over_budget, ("over_budget", "training", "queued"), one_round, history=("audit", "notices")
)

STATES = (
    State(
        "training",
        "nothing while it steps; a warning at warn_at of the cap, release before the cap",
        _no_deadline,
        "the cap (run.max_cost_usd)",
    ),
    State("over_budget", "sync and release", one_round, "released before the next round reaches the cap"),
)
