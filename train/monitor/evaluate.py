"""Alert rules over node samples: which alerts fire now, and which changed since the last round.

Pure: no I/O and no clock of its own; the aggregator passes the time. Semantics follow Prometheus'
alerting rules: a condition must hold for its `for` duration before the alert fires, and a firing alert
resolves once its condition has been false for `keep_firing_for_s` (Prometheus' `keep_firing_for`, 2.42+),
so a figure hovering at its threshold gives one firing and one resolved message, not a message a round. A
node that could not be scraped keeps its alerts as they were (no data is not "healthy") and, after
`unreachable_after` failed rounds, fires its own critical alert.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from train.monitor.rules import AlertRules
from train.monitor.ruletable import BY_NAME, RULES_TABLE, RuleDef, for_seconds
from train.monitor.scrape import NodeSample

Severity = Literal["warning", "critical"]


@dataclass(frozen=True)
class Alert:
    """One firing condition; `key` identifies it across rounds."""

    rule: str
    severity: Severity
    node: str  # "" for a run-wide alert
    gpu: str | None
    summary: str  # one line naming the node (and GPU) and the figure
    advice: str  # what to do

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.rule, self.node, self.gpu)


@dataclass(frozen=True)
class Transition:
    state: Literal["firing", "resolved"]
    alert: Alert
    at: float


@dataclass(frozen=True)
class Money:
    """The run's cost so far and where it is heading (USD)."""

    spent_usd: float
    burn_usd_per_h: float
    projected_usd: float
    budget_usd: float


@dataclass(frozen=True)
class _Candidate:
    alert: Alert
    for_s: float


@dataclass
class _Progress:
    step: float | None = None
    changed_at: float = 0.0


@dataclass
class Evaluator:
    """Keeps what the rules need between rounds (pending times, baselines, last steps)."""

    rules: AlertRules
    started_at: float
    pending: dict[tuple[str, str, str | None], float] = field(default_factory=dict)
    firing: dict[tuple[str, str, str | None], Alert] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    progress: dict[str, _Progress] = field(default_factory=dict)
    baselines: dict[tuple[str, str, str], float] = field(default_factory=dict)
    cleared: dict[tuple[str, str, str | None], float] = field(default_factory=dict)  # firing, false since

    def evaluate(
        self, samples: Sequence[NodeSample], now: float, money: Money | None = None
    ) -> list[Transition]:
        """Apply every rule to this round's samples; return the alerts that started or stopped firing."""
        candidates: list[_Candidate] = []
        held: set[tuple[str, str, str | None]] = set()  # a silent node's alerts stay as they were
        for sample in samples:
            if sample.ok:
                self.failures[sample.node] = 0
                candidates += self._node_candidates(sample, now)
            else:
                self.failures[sample.node] = self.failures.get(sample.node, 0) + 1
                held |= {k for k in self.firing if k[1] == sample.node and k[0] != "node_unreachable"}
                held |= {k for k in self.pending if k[1] == sample.node and k[0] != "node_unreachable"}
                candidates += self._unreachable(sample)
        if money is not None:
            candidates += self._money_candidates(money)
        true_now = {c.alert.key for c in candidates}
        self.pending = {k: t for k, t in self.pending.items() if k in true_now or k in held}
        active: dict[tuple[str, str, str | None], Alert] = {}
        for c in candidates:
            since = self.pending.setdefault(c.alert.key, now)
            if now - since >= c.for_s or c.alert.key in self.firing:
                active[c.alert.key] = c.alert
        for key in held:
            if key in self.firing:
                active.setdefault(key, self.firing[key])
        for key, alert in self.firing.items():  # false now: keep firing until false for keep_firing_for_s
            if key in active:
                self.cleared.pop(key, None)
            elif now - self.cleared.setdefault(key, now) < self.rules.keep_firing_for_s:
                active[key] = alert
            else:
                del self.cleared[key]
        transitions = [Transition("firing", a, now) for k, a in active.items() if k not in self.firing]
        transitions += [Transition("resolved", a, now) for k, a in self.firing.items() if k not in active]
        self.firing = active
        return transitions

    def _alert(self, d: RuleDef, node: str, gpu: str | None, **words: Any) -> Alert:
        """An alert in the table's words for this rule (`where` names the node and the GPU)."""
        where = f"{node} GPU {gpu}" if gpu is not None else node
        summary = d.message.format(r=self.rules, **{"where": where, **words})
        return Alert(d.name, d.severity, node, gpu, summary, d.advice)

    def _unreachable(self, sample: NodeSample) -> Iterator[_Candidate]:
        d = BY_NAME["node_unreachable"]
        count = self.failures[sample.node]
        if count >= self.rules.unreachable_after:
            yield _Candidate(self._alert(d, sample.node, None, value=count, limit=sample.error), 0.0)

    def _node_candidates(self, s: NodeSample, now: float) -> Iterator[_Candidate]:
        for d in RULES_TABLE:
            if d.kind == "gauge":
                yield from self._gauge(d, s)
            elif d.kind == "increase":
                yield from self._increase(d, s)
            elif d.kind == "stalled":
                yield from self._stall(d, s, now)

    def _gauge(self, d: RuleDef, s: NodeSample) -> Iterator[_Candidate]:
        """The series' value (x the rule's scale, or over its denominator) against the rule's threshold."""
        r = self.rules
        limit = float(getattr(r, d.threshold or ""))
        if d.off_at_zero and limit <= 0:
            return
        raw: Any = getattr(s, d.sample)
        values: dict[str | None, float] = dict(raw) if d.per_gpu else ({} if raw is None else {None: raw})
        for_s = for_seconds(d, r)
        for gpu, v in values.items():
            if d.denominator is not None:
                _, attr, fallback = d.denominator
                total = getattr(s, attr).get(gpu) or getattr(r, fallback)
                if total <= 0:
                    continue
                value = v / total
            else:
                value = v * d.scale
            if value < limit if d.op == "<" else value > limit:
                words = {"value": value, "limit": limit, "for_min": for_s / 60}
                yield _Candidate(self._alert(d, s.node, gpu, **words), for_s)

    def _increase(self, d: RuleDef, s: NodeSample) -> Iterator[_Candidate]:
        """A counter above its first reading (an XID or ECC error already there at start is not new)."""
        series: dict[str, float] = getattr(s, d.sample)
        for gpu, count in series.items():
            base = self.baselines.setdefault((d.name, s.node, gpu), count)
            if count > base:
                yield _Candidate(self._alert(d, s.node, gpu, value=count - base), 0.0)

    def _stall(self, d: RuleDef, s: NodeSample, now: float) -> Iterator[_Candidate]:
        r = self.rules
        p = self.progress.setdefault(s.node, _Progress(changed_at=now))
        if s.step is not None and s.step != p.step:
            p.step, p.changed_at = s.step, now
        limit = r.stalled_after_s if p.step is not None else max(r.stalled_after_s, r.startup_grace_s)
        since = p.changed_at if p.step is not None else min(p.changed_at, self.started_at)
        if now - since >= limit:
            what = f"no new step since step {p.step:.0f}" if p.step is not None else "no training step yet"
            yield _Candidate(self._alert(d, s.node, None, value=what, for_min=_duration(now - since)), 0.0)

    def _money_candidates(self, m: Money) -> Iterator[_Candidate]:
        if m.budget_usd > 0 and m.projected_usd > m.budget_usd:
            d = BY_NAME["cost_over_budget"]
            spent = f"(spent ${m.spent_usd:,.0f}, burning ${m.burn_usd_per_h:,.2f}/h)"
            yield _Candidate(
                self._alert(d, "", None, value=m.projected_usd, limit=m.budget_usd, where=spent), 0.0
            )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def project(rules: AlertRules, started_at: float, now: float, step: float | None) -> Money:
    """Cost so far at the stack's hourly price, and the run's projected total.

    The projection scales elapsed time by the share of planned steps done when both are known; otherwise
    it takes the planned hours (the forecast's, or max_run_hours) or the time already spent, whichever is
    larger. The aggregator has no RunPod key (it never reaches a node), so this is the price the stack
    declared; `scripts/watch` shows RunPod's own billing beside it.
    """
    hours = max(0.0, now - started_at) / 3600
    spent = hours * rules.cost_per_hour_usd
    if rules.total_steps > 0 and step is not None and step > 0:
        projected_hours = hours * rules.total_steps / min(step, rules.total_steps)
    else:
        projected_hours = max(hours, rules.planned_hours)
    return Money(spent, rules.cost_per_hour_usd, projected_hours * rules.cost_per_hour_usd, rules.budget_usd)
