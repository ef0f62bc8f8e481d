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
from typing import Literal

from train.monitor.rules import AlertRules
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

    def _unreachable(self, sample: NodeSample) -> Iterator[_Candidate]:
        count = self.failures[sample.node]
        if count >= self.rules.unreachable_after:
            yield _Candidate(
                Alert(
                    "node_unreachable",
                    "critical",
                    sample.node,
                    None,
                    f"{sample.node}: metrics agent unreachable for {count} rounds ({sample.error})",
                    "check the pod in RunPod's console or `scripts/watch`; replace it if it is gone",
                ),
                0.0,
            )

    def _node_candidates(self, s: NodeSample, now: float) -> Iterator[_Candidate]:
        r = self.rules
        yield from self._gpu_candidates(s)
        if s.nvme_write_p99_s is not None and s.nvme_write_p99_s * 1e6 > r.nvme_p99_max_us:
            yield _Candidate(
                Alert(
                    "nvme_latency_high",
                    "warning",
                    s.node,
                    None,
                    f"{s.node}: checkpoint volume p99 write latency {s.nvme_write_p99_s * 1e6:.0f} us "
                    f"(limit {r.nvme_p99_max_us:.0f} us)",
                    "pause checkpoint writes or data loading on this volume until latency recovers",
                ),
                0.0,
            )
        busbw = s.busbw_bytes_per_s
        if r.min_busbw_gb_per_s > 0 and busbw is not None and busbw / 1e9 < r.min_busbw_gb_per_s:
            yield _Candidate(
                Alert(
                    "busbw_low",
                    "warning",
                    s.node,
                    None,
                    f"{s.node}: all-reduce bus bandwidth {busbw / 1e9:.1f} GB/s "
                    f"(floor {r.min_busbw_gb_per_s:g} GB/s)",
                    "check the fabric (NCCL_SOCKET_IFNAME, NVLink state); replace a node that stays slow",
                ),
                0.0,
            )
        yield from self._stall_candidates(s, now)

    def _gpu_candidates(self, s: NodeSample) -> Iterator[_Candidate]:
        r = self.rules
        for gpu, util in s.gpu_util.items():
            where = f"{s.node} GPU {gpu}"
            if util < r.util_low_ratio:
                yield _Candidate(
                    Alert(
                        "gpu_util_low",
                        "warning",
                        s.node,
                        gpu,
                        f"{where}: utilisation {util:.0%} "
                        f"(healthy {r.util_low_ratio:.0%}-{r.util_high_ratio:.0%})",
                        "input pipeline or CPU bottleneck: more data-loader workers, faster storage",
                    ),
                    r.util_low_for_s,
                )
            elif util > r.util_high_ratio:
                yield _Candidate(
                    Alert(
                        "gpu_util_high",
                        "warning",
                        s.node,
                        gpu,
                        f"{where}: utilisation {util:.0%} for {r.util_high_for_s / 60:.0f} min",
                        "memory pressure, no headroom: smaller micro-batch or activation checkpointing",
                    ),
                    r.util_high_for_s,
                )
        for gpu, used in s.gpu_mem_used.items():
            total = s.gpu_mem_total.get(gpu) or r.gpu_memory_bytes
            if total > 0 and used / total < r.memory_idle_ratio:
                yield _Candidate(
                    Alert(
                        "gpu_idle",
                        "warning",
                        s.node,
                        gpu,
                        f"{s.node} GPU {gpu}: memory use {used / total:.0%} for "
                        f"{r.memory_idle_for_s / 60:.0f} min: the GPU is idle",
                        "check that every rank started; an idle GPU still bills",
                    ),
                    r.memory_idle_for_s,
                )
        for gpu, temp in s.gpu_temp.items():
            if temp > r.temperature_max_c:
                yield _Candidate(
                    Alert(
                        "gpu_temperature_high",
                        "warning",
                        s.node,
                        gpu,
                        f"{s.node} GPU {gpu}: {temp:.0f} C (limit {r.temperature_max_c:.0f} C)",
                        "expect thermal throttling; ask RunPod support if it persists",
                    ),
                    0.0,
                )
        for label, series in (("XID", s.gpu_xid), ("uncorrected ECC", s.gpu_ecc_uncorrected)):
            for gpu, count in series.items():
                base = self.baselines.setdefault((label, s.node, gpu), count)
                if count > base:
                    yield _Candidate(
                        Alert(
                            "gpu_xid" if label == "XID" else "gpu_ecc_uncorrected",
                            "critical",
                            s.node,
                            gpu,
                            f"{s.node} GPU {gpu}: {count - base:.0f} new {label} error(s)",
                            "the GPU is faulty: checkpoint, then replace the pod (or the cluster)",
                        ),
                        0.0,
                    )

    def _stall_candidates(self, s: NodeSample, now: float) -> Iterator[_Candidate]:
        r = self.rules
        p = self.progress.setdefault(s.node, _Progress(changed_at=now))
        if s.step is not None and s.step != p.step:
            p.step, p.changed_at = s.step, now
        limit = r.stalled_after_s if p.step is not None else max(r.stalled_after_s, r.startup_grace_s)
        since = p.changed_at if p.step is not None else min(p.changed_at, self.started_at)
        if now - since >= limit:
            what = f"no new step since step {p.step:.0f}" if p.step is not None else "no training step yet"
            yield _Candidate(
                Alert(
                    "training_stalled",
                    "critical",
                    s.node,
                    None,
                    f"{s.node}: {what} for {_duration(now - since)}",
                    "look at the node's training log; a hung collective usually means a dead rank",
                ),
                0.0,
            )

    def _money_candidates(self, m: Money) -> Iterator[_Candidate]:
        if m.budget_usd > 0 and m.projected_usd > m.budget_usd:
            yield _Candidate(
                Alert(
                    "cost_over_budget",
                    "critical",
                    "",
                    None,
                    f"run projected at ${m.projected_usd:,.0f} against a budget of ${m.budget_usd:,.0f} "
                    f"(spent ${m.spent_usd:,.0f}, burning ${m.burn_usd_per_h:,.2f}/h)",
                    "stop or shrink the run, or raise trainstack:run.max_cost_usd in a reviewed change",
                ),
                0.0,
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
