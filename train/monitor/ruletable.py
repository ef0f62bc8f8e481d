"""The one definition of each alert rule: the aggregator evaluates it, the Prometheus rules come from it.

`RULES_TABLE` names, per rule, the agent's series (train/node/agent.py, the names `scrape.parse` reads), how
the series compares with which `AlertRules` threshold, the threshold's `for` duration, the severity and the
words. `train/monitor/evaluate.py` applies the table to each round's `NodeSample`s; `prometheus_group`
turns the same rows into one Prometheus rule group (stackconfig/alerts.py writes it as YAML). A row's
`kind` says what the comparison is over:

- `gauge`: the series' newest value (per GPU or per node) against the threshold, held `for` its duration;
  with `denominator`, the ratio of two series (the rule's fallback field when the node does not serve it).
- `increase`: a counter grew (XID, uncorrected ECC). The aggregator counts from the first reading it saw and
  keeps firing until the pod is replaced; Prometheus' `increase()` over two scrapes fires for that window.
- `stalled`: the training step did not change for the threshold's seconds. The aggregator also waits the
  start-up grace before the first step; Prometheus (no history before the series) starts once the series
  is that old.
- `up`: the agent's scrape failed; Prometheus' own `up` series, `for` the rounds before the alert.
- `money`: the run's projected cost (aggregator only: no node serves a cost series).

Standard library only: the aggregator runs on the nodes. tests/train/monitor/test_rule_parity.py runs both
on the same series (promtool test rules) and asserts the same alerts fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from train.monitor.rules import AlertRules

Kind = Literal["gauge", "increase", "stalled", "up", "money"]
Severity = Literal["warning", "critical"]


@dataclass(frozen=True)
class RuleDef:
    """One alert rule. The aggregator compares `value x scale` (display units, e.g. us) with the threshold
    field's value; Prometheus compares the raw series with threshold / scale."""

    name: str  # the aggregator's rule id (messages, state file)
    alert: str  # the Prometheus alert name
    kind: Kind
    metric: str  # the agent's series
    sample: str  # the `NodeSample` attribute `scrape.parse` fills from `metric`
    per_gpu: bool
    op: Literal["<", ">"]
    threshold: str | None  # an `AlertRules` field
    for_field: str | None  # an `AlertRules` field (seconds), None: fires at once
    severity: Severity
    summary: str  # Prometheus' one-line summary
    message: str  # the aggregator's line: str.format(where=, value=, limit=, for_min=, r=)
    advice: str
    scale: float = 1.0
    matcher: str = ""  # extra label matchers, e.g. quantile="0.99"
    denominator: tuple[str, str, str] | None = None  # (metric, sample attribute, fallback AlertRules field)
    off_at_zero: bool = False  # a threshold of 0 means no rule


RULES_TABLE: tuple[RuleDef, ...] = (
    RuleDef(
        "gpu_util_low",
        "GpuUtilisationLow",
        "gauge",
        "trainstack_gpu_utilization_ratio",
        "gpu_util",
        True,
        "<",
        "util_low_ratio",
        "util_low_for_s",
        "warning",
        "input pipeline or CPU bottleneck",
        "{where}: utilisation {value:.0%} (healthy {r.util_low_ratio:.0%}-{r.util_high_ratio:.0%})",
        "input pipeline or CPU bottleneck: more data-loader workers, faster storage",
    ),
    RuleDef(
        "gpu_util_high",
        "GpuUtilisationHigh",
        "gauge",
        "trainstack_gpu_utilization_ratio",
        "gpu_util",
        True,
        ">",
        "util_high_ratio",
        "util_high_for_s",
        "warning",
        "memory pressure",
        "{where}: utilisation {value:.0%} for {for_min:.0f} min",
        "memory pressure, no headroom: smaller micro-batch or activation checkpointing",
    ),
    RuleDef(
        "gpu_idle",
        "GpuIdle",
        "gauge",
        "trainstack_gpu_memory_used_bytes",
        "gpu_mem_used",
        True,
        "<",
        "memory_idle_ratio",
        "memory_idle_for_s",
        "warning",
        "idle GPU",
        "{where}: memory use {value:.0%} for {for_min:.0f} min: the GPU is idle",
        "check that every rank started; an idle GPU still bills",
        denominator=("trainstack_gpu_memory_total_bytes", "gpu_mem_total", "gpu_memory_bytes"),
    ),
    RuleDef(
        "gpu_temperature_high",
        "GpuTemperatureHigh",
        "gauge",
        "trainstack_gpu_temperature_celsius",
        "gpu_temp",
        True,
        ">",
        "temperature_max_c",
        None,
        "warning",
        "GPU too hot",
        "{where}: {value:.0f} C (limit {limit:.0f} C)",
        "expect thermal throttling; ask RunPod support if it persists",
    ),
    RuleDef(
        "gpu_xid",
        "GpuXid",
        "increase",
        "trainstack_gpu_xid_errors_total",
        "gpu_xid",
        True,
        ">",
        None,
        None,
        "critical",
        "new XID error: replace the pod",
        "{where}: {value:.0f} new XID error(s)",
        "the GPU is faulty: checkpoint, then replace the pod (or the cluster)",
    ),
    RuleDef(
        "gpu_ecc_uncorrected",
        "GpuEccUncorrected",
        "increase",
        "trainstack_gpu_ecc_uncorrected_errors_total",
        "gpu_ecc_uncorrected",
        True,
        ">",
        None,
        None,
        "critical",
        "new uncorrected ECC error: replace the pod",
        "{where}: {value:.0f} new uncorrected ECC error(s)",
        "the GPU is faulty: checkpoint, then replace the pod (or the cluster)",
    ),
    RuleDef(
        "nvme_latency_high",
        "NvmeLatencyHigh",
        "gauge",
        "trainstack_storage_write_latency_seconds",
        "nvme_write_p99_s",
        False,
        ">",
        "nvme_p99_max_us",
        None,
        "warning",
        "checkpoint volume slow: pause writes",
        "{where}: checkpoint volume p99 write latency {value:.0f} us (limit {limit:.0f} us)",
        "pause checkpoint writes or data loading on this volume until latency recovers",
        scale=1e6,
        matcher='quantile="0.99"',
    ),
    RuleDef(
        "busbw_low",
        "AllReduceBusBandwidthLow",
        "gauge",
        "trainstack_allreduce_busbw_bytes_per_second",
        "busbw_bytes_per_s",
        False,
        "<",
        "min_busbw_gb_per_s",
        None,
        "warning",
        "fabric slower than the stack's floor",
        "{where}: all-reduce bus bandwidth {value:.1f} GB/s (floor {limit:g} GB/s)",
        "check the fabric (NCCL_SOCKET_IFNAME, NVLink state); replace a node that stays slow",
        scale=1e-9,
        off_at_zero=True,
    ),
    RuleDef(
        "training_stalled",
        "TrainingStalled",
        "stalled",
        "trainstack_train_step",
        "step",
        False,
        ">",
        "stalled_after_s",
        None,
        "critical",
        "no new training step",
        "{where}: {value} for {for_min}",
        "look at the node's training log; a hung collective usually means a dead rank",
    ),
    RuleDef(
        "node_unreachable",
        "NodeUnreachable",
        "up",
        "up",
        "",
        False,
        ">",
        "unreachable_after",
        None,
        "critical",
        "metrics agent unreachable",
        "{where}: metrics agent unreachable for {value} rounds ({limit})",
        "check the pod in RunPod's console or `scripts/watch`; replace it if it is gone",
    ),
    RuleDef(
        "cost_over_budget",
        "CostOverBudget",
        "money",
        "",
        "",
        False,
        ">",
        "budget_usd",
        None,
        "critical",
        "run projected over its budget",
        "run projected at ${value:,.0f} against a budget of ${limit:,.0f} {where}",
        "stop or shrink the run, or raise trainstack:run.max_cost_usd in a reviewed change",
    ),
)
BY_NAME: dict[str, RuleDef] = {d.name: d for d in RULES_TABLE}


def _dur(seconds: float) -> str:
    return f"{max(0, round(seconds))}s"


def _num(x: float) -> str:
    """A threshold in PromQL: exact for the usual figures (1e-4, 8000000000), never a float's tail."""
    return f"{x:.0f}" if x >= 1e6 else f"{x:.12g}"


def promql(d: RuleDef, rules: AlertRules, stack: str) -> str | None:
    """The rule's Prometheus expression over the agents' series; None where Prometheus has no rule."""
    sel = f'stack="{stack}"' + (f",{d.matcher}" if d.matcher else "")
    series = f"{d.metric}{{{sel}}}"
    if d.kind == "money":
        return None
    if d.kind == "up":
        return f'up{{stack="{stack}",job="trainstack-agent"}} == 0'
    if d.kind == "increase":
        return f"increase({series}[{_dur(rules.interval_s * 2)}]) > 0"  # two scrapes: increase() needs two
    if d.kind == "stalled":
        window = _dur(getattr(rules, d.threshold or ""))
        # the series existed a whole window ago: a new series has not stalled yet
        return f"changes({series}[{window}]) == 0 and ({series} offset {window})"
    limit = float(getattr(rules, d.threshold or ""))
    if d.off_at_zero and limit <= 0:
        return None
    if d.denominator is not None:
        den_metric, _, fallback = d.denominator
        den = f"{den_metric}{{{sel}}}"
        bytes_limit = limit * float(getattr(rules, fallback))
        return (
            f"({series} / {den}) {d.op} {_num(limit)} or ({series} unless {den}) {d.op} {_num(bytes_limit)}"
        )
    return f"{series} {d.op} {_num(limit / d.scale)}"


def for_seconds(d: RuleDef, rules: AlertRules) -> float:
    if d.kind == "up":
        return rules.interval_s * max(0, rules.unreachable_after - 1)
    return float(getattr(rules, d.for_field)) if d.for_field else 0.0


def prometheus_group(rules: AlertRules, stack: str) -> dict[str, Any]:
    """One Prometheus rule group (prometheus.io/docs/prometheus/latest/configuration/alerting_rules/)."""
    out: list[dict[str, Any]] = []
    for d in RULES_TABLE:
        expr = promql(d, rules, stack)
        if expr is None:
            continue
        for_s = for_seconds(d, rules)
        where = " on {{ $labels.node }}" + (" GPU {{ $labels.gpu }}" if d.per_gpu else "")
        out.append(
            {
                "alert": d.alert,
                "expr": expr,
                **({"for": _dur(for_s)} if for_s > 0 else {}),
                **({"keep_firing_for": _dur(rules.keep_firing_for_s)} if rules.keep_firing_for_s > 0 else {}),
                "labels": {"severity": d.severity, "stack": stack, "rule": d.name},
                "annotations": {"summary": d.summary + where, "advice": d.advice},
            }
        )
    return {"name": f"trainstack-{stack}", "interval": _dur(rules.interval_s), "rules": out}
