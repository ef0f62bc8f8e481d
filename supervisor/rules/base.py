"""What every rule is made of, and the reading of history they share.

A `Rule` is a pure function of this round's observation, the rounds before and the policy, with its
declarations: the lifecycle states its decisions may carry (`owns`), how long after its trigger it acts
(`deadline_min`, None: no deadline of its own, the cap bounds it), how far back in the audit lines it
reads (`look_back_min`: the round's history window is the longest of them) and which of the supervisor's
records it needs (`history`). A `State` is a lifecycle state described once, by the rule module that
owns it first (supervisor/lifecycle.py gathers them; docs/SUPERVISOR.md's table is tested against them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

from supervisor.model import Decision, Kind, Observation, RoundRecord, newest_first
from supervisor.policy import Policy

Decide = Callable[[Observation, Sequence[RoundRecord], Policy], Decision | None]
Minutes = Callable[[Policy], float | None]
# The supervisor's own records a rule reads: the audit lines, the one-time notices, the recovery attempts.
Record = Literal["audit", "notices", "attempts"]


def no_look_back(_p: Policy) -> float:
    return 0.0


def one_round(p: Policy) -> float:
    return p.interval_min


@dataclass(frozen=True)
class Rule:
    name: str
    decide: Decide
    owns: tuple[str, ...]  # the lifecycle states its decisions carry
    deadline_min: Minutes  # from its trigger to its action; None: the cap bounds it
    look_back_min: Callable[[Policy], float] = no_look_back
    history: tuple[Record, ...] = ()

    def __call__(self, obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
        return self.decide(obs, history, policy)


@dataclass(frozen=True)
class State:
    """A lifecycle state: what its owners do, its deadline (None: no deadline of its own) and the bound in
    words."""

    name: str
    acts: str
    deadline_min: Minutes
    bound: str


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def pct(ratio: float) -> Decimal:
    """A ratio as an exact percentage (0.29 -> 29), so a value at the threshold is not under it."""
    return (Decimal(repr(ratio)) * 100).normalize()


def under(ratio: float | None, threshold_pct: float) -> bool:
    """GPU utilisation read and under the threshold, compared exactly."""
    return ratio is not None and pct(ratio) < Decimal(repr(threshold_pct))


def earlier(obs: Observation, history: Sequence[RoundRecord]) -> list[Observation]:
    """The rounds before this one, newest first, one per time: an audit line dated at or after this round
    (a supervisor whose clock ran ahead, a repeated line) is no evidence about the past."""
    seen: set[float] = set()
    out = []
    for record in newest_first(history):
        o = record.observation
        if o.at >= obs.at or o.at in seen:
            continue
        seen.add(o.at)
        out.append(o)
    return out


def notified(history: Sequence[RoundRecord], kind: Kind, since: float, before: float) -> float | None:
    """When a message of this kind was last sent in [since, before) (None: not in that time)."""
    for record in newest_first(history):
        at = record.observation.at
        if at >= before:
            continue
        if at < since:
            break
        if record.decision.kind == kind and "notify" in record.done:
            return at
    return None


def once(obs: Observation, key: str, decision: Decision, history: Sequence[RoundRecord] = ()) -> Decision:
    """A message sent once for what `key` names: without its notify (and with its reason) when `key` was sent
    already (the notices kept beside the audit lines; or an audit line of the window that sent it)."""
    sent = any(r.decision.once == key and "notify" in r.done for r in history)
    if key in obs.notices or sent:
        return replace(decision, actions=tuple(a for a in decision.actions if a != "notify"), message="")
    return replace(decision, once=key)


def compute_since(obs: Observation, history: Sequence[RoundRecord], pod: str | None = None) -> float:
    """When this compute came up, on the supervisor's clock: the first round in a row that saw the same pods
    (a replace is new compute; a pool's ended trial leaving is not), and never before the newest recovery
    began (a restart boots again; `pod`: a pool's trial, whose clock only its own recoveries restart)."""
    start = obs.at
    for past in earlier(obs, history):
        if past.nodes == 0 or (obs.pods and past.pods and not set(obs.pods) <= set(past.pods)):
            break
        start = past.at
    attempts = obs.fleet.attempts if obs.fleet else ()
    mine = [a for a in attempts if pod is None or not a.targets or pod in a.targets]
    recovered = max((a.at for a in mine if a.at <= obs.at), default=0.0)
    return max(start, recovered)


def live(obs: Observation) -> bool:
    """Compute is up and the run is active (or recovering): a rule about a run has something to judge."""
    return obs.nodes > 0 and obs.phase in ("active", "recovering")
