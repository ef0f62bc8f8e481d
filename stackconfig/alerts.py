"""`trainstack:alerts`: when the run's watcher raises an alert, validated at preview (optional section).

    trainstack:alerts:
      interval_min: 5               # scrape and evaluate every 5 minutes (shorter allowed, >= 1 s)
      util_low_pct: 70              # GPU utilisation below this for util_low_for_min: input/CPU bottleneck
      util_high_pct: 95             # above this for util_high_for_min: memory pressure
      memory_idle_pct: 10           # GPU memory use below this for memory_idle_for_min: idle GPUs
      nvme_p99_max_us: 100          # checkpoint volume p99 write latency
      temperature_max_c: 85
      stalled_after_min: 15         # no new training step: the critical alert, to a person (the
                                    # supervisor's own hang is trainstack:recovery.hang_after_min, 10)
      keep_firing_for_min: 5        # resolve only after the condition is false this long (no flapping)
      budget_usd: 5000              # deprecated: trainstack:run.max_cost_usd is the run's one cap

Defaults follow the source article's golden metrics (healthy GPU utilisation 75-95 %, NVMe under 100 us);
the all-reduce floor is `training.nccl_min_busbw_gb_per_s`, the cost per hour the stack's own. The same values
become the nodes' `alerts.json` and `out/<stack>/alerts.rules.yml` (Prometheus). Each key's default, unit
factor and label live once, in train/monitor/rules.py `THRESHOLDS`; the bounds below are the config's own.
docs/MONITORING.md explains each rule.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from stackconfig.numbers import Number
from train.monitor.rules import BY_CONFIG_KEY, THRESHOLDS, AlertRules
from train.monitor.ruletable import prometheus_group

_DAY_MIN = 1440  # the longest window or grace any alert takes, in minutes
WEBHOOK_SECRET = "ALERT_WEBHOOK_URL"  # noqa: S105 (a name, not a value) listed in training.secrets; the aggregator reads it from its env


def _d(key: str) -> Any:  # a float, or an int for the counts; pydantic checks it
    """A key's default, in the config's units, from the one table (train/monitor/rules.py THRESHOLDS)."""
    return BY_CONFIG_KEY[key].default


class AlertsConfig(BaseModel):
    """The team-facing thresholds (percent, minutes, microseconds), turned into `AlertRules`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    enabled: bool = True  # false: no aggregator on node 0 (the agents still serve metrics)
    # Number: never a boolean, numeric text read (`pulumi config set --path` stores 2.5 as "2.5"); every
    # field bounded above too, so no figure overflows into the rules (1e308 minutes is not a threshold).
    interval_min: Number = Field(_d("interval_min"), gt=0, le=60)
    util_low_pct: Number = Field(_d("util_low_pct"), ge=0, le=100)
    util_low_for_min: Number = Field(_d("util_low_for_min"), ge=0, le=_DAY_MIN)
    util_high_pct: Number = Field(_d("util_high_pct"), ge=0, le=100)
    util_high_for_min: Number = Field(_d("util_high_for_min"), ge=0, le=_DAY_MIN)
    memory_idle_pct: Number = Field(_d("memory_idle_pct"), ge=0, le=100)
    memory_idle_for_min: Number = Field(_d("memory_idle_for_min"), ge=0, le=_DAY_MIN)
    nvme_p99_max_us: Number = Field(_d("nvme_p99_max_us"), gt=0, le=10_000_000)
    temperature_max_c: Number = Field(_d("temperature_max_c"), gt=0, le=120)
    stalled_after_min: Number = Field(_d("stalled_after_min"), gt=0, le=_DAY_MIN)
    startup_grace_min: Number = Field(_d("startup_grace_min"), ge=0, le=_DAY_MIN)
    unreachable_after_rounds: int = Field(_d("unreachable_after_rounds"), ge=1, le=100)
    keep_firing_for_min: Number = Field(_d("keep_firing_for_min"), ge=0, le=_DAY_MIN)
    budget_usd: Number = Field(_d("budget_usd"), ge=0, le=10_000_000)
    max_messages_per_hour: int = Field(_d("max_messages_per_hour"), ge=1, le=3600)
    digest_every_min: Number = Field(_d("digest_every_min"), ge=0, le=_DAY_MIN)

    @model_validator(mode="after")
    def _band(self) -> AlertsConfig:
        if self.util_low_pct >= self.util_high_pct:
            raise ValueError(
                f"util_low_pct ({self.util_low_pct:g}) must be below util_high_pct ({self.util_high_pct:g}); "
                "the healthy band lies between them (the default is 70-95)"
            )
        if self.interval_min * 60 < 1:
            raise ValueError("interval_min must be at least 1 second (1/60 min)")
        return self


def alert_rules(
    alerts: AlertsConfig,
    *,
    cost_per_hour_usd: float,
    planned_hours: float,
    min_busbw_gb_per_s: float,
    gpu_memory_bytes: float,
    budget_usd: float | None = None,
) -> AlertRules:
    """The record the aggregator applies: the config's units turned into seconds and ratios (THRESHOLDS).

    The fields with no config key come from the stack; `budget_usd` from the run's cap when given."""
    from_stack: dict[str, float] = {
        "cost_per_hour_usd": cost_per_hour_usd,
        "planned_hours": planned_hours,
        "min_busbw_gb_per_s": min_busbw_gb_per_s,
        "gpu_memory_bytes": gpu_memory_bytes,
    }
    if budget_usd is not None:
        from_stack["budget_usd"] = budget_usd
    values: dict[str, Any] = {}
    for t in THRESHOLDS:
        if t.field in from_stack:
            values[t.field] = from_stack[t.field]
        elif t.config_key is not None:
            values[t.field] = t.to_rule(getattr(alerts, t.config_key))
        else:
            values[t.field] = t.rule_default
    return AlertRules(**values)


def prometheus_rules(rules: AlertRules, stack: str) -> str:
    """`alerts.rules.yml` for teams with their own Prometheus, over the agents' metrics.

    Each rule comes from the one table the node aggregator evaluates (train/monitor/ruletable.py), with the
    same thresholds. Format: Prometheus alerting rules
    (prometheus.io/docs/prometheus/latest/configuration/alerting_rules/); `promtool check rules` accepts it
    and `promtool test rules` fires the aggregator's alerts on the aggregator's series
    (tests/stackconfig/test_alerts.py, tests/train/monitor/test_rule_parity.py)."""
    header = f"# Rendered from trainstack:alerts of stack {stack}; do not edit (docs/MONITORING.md).\n"
    return header + yaml.safe_dump({"groups": [prometheus_group(rules, stack)]}, sort_keys=False, width=200)
