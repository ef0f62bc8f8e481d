"""Alert thresholds: one frozen record, read from the `alerts.json` the cluster component delivers.

The stack config's `trainstack:alerts` (stackconfig/alerts.py validates it at preview, key by key) is
rendered into `alerts.json` beside the start scripts; the aggregator on node 0 and `scripts/watch` read it
with `AlertRules.from_json`, and the Prometheus rules file is rendered from the same values. `THRESHOLDS`
is the one table of the facts per field (config key, unit factor, label, default): the config model's
defaults, `stackconfig.alerts.alert_rules` and the PR report's table (report/alerts.py) iterate it, so a
threshold is written in one place. Defaults follow the golden-metrics practice of the source article (GPU
utilisation healthy at 75-95 %, NVMe latency under 100 us, temperature under 85 C) and NVIDIA's guidance that
any XID or uncorrected ECC error needs attention (NVIDIA, "XID Errors", docs.nvidia.com/deploy/xid-errors).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from typing import Any


class RulesError(ValueError):
    """alerts.json breaks a rule; the message names the key."""


_MIN = Fraction(60)  # config minutes -> rule seconds
_PCT = Fraction(1, 100)  # config percent -> rule ratio
_ONE = Fraction(1)


@dataclass(frozen=True)
class Threshold:
    """One `AlertRules` field: where its value comes from, how it converts, how people read it.

    `config_key` is the `trainstack:alerts` key (None: the stack supplies it: forecast, training, GPU table);
    rule value = config value x `factor` (exact, so 70 % is 0.7, not 0.7000000000000001); `default` is in
    the config's units; `label` None: the report shows the raw value under the field's name."""

    field: str
    config_key: str | None
    factor: Fraction
    label: str | None
    unit: str
    default: float | int

    def to_rule(self, value: float | int) -> float | int:
        return value if self.factor == 1 else float(Fraction(value) * self.factor)

    @property
    def rule_default(self) -> float | int:
        return self.to_rule(self.default)


THRESHOLDS: tuple[Threshold, ...] = (
    # scrape + evaluate every 5 minutes (the article's cadence)
    Threshold("interval_s", "interval_min", _MIN, "scrape and evaluate every", "min", 5.0),
    # below this, sustained: the input pipeline or CPU starves the GPUs
    Threshold("util_low_ratio", "util_low_pct", _PCT, "GPU utilisation low below", "%", 70.0),
    Threshold("util_low_for_s", "util_low_for_min", _MIN, "... for", "min", 15.0),
    # above this for 10 min: memory pressure / no headroom
    Threshold("util_high_ratio", "util_high_pct", _PCT, "GPU utilisation high above", "%", 95.0),
    Threshold("util_high_for_s", "util_high_for_min", _MIN, "... for", "min", 10.0),
    # GPU memory use below this for 5 min: the GPU is idle
    Threshold("memory_idle_ratio", "memory_idle_pct", _PCT, "GPU idle: memory use below", "%", 10.0),
    Threshold("memory_idle_for_s", "memory_idle_for_min", _MIN, "... for", "min", 5.0),
    # all-reduce bus bandwidth floor (0: no rule); from training.nccl_min_busbw_gb_per_s
    Threshold("min_busbw_gb_per_s", None, _ONE, "all-reduce bus bandwidth floor", "GB/s", 0.0),
    # p99 of small synced writes on the checkpoint volume
    Threshold("nvme_p99_max_us", "nvme_p99_max_us", _ONE, "NVMe p99 write latency above", "us", 100.0),
    Threshold("temperature_max_c", "temperature_max_c", _ONE, "GPU temperature above", "C", 85.0),
    # no new training step for this long: critical
    Threshold("stalled_after_s", "stalled_after_min", _MIN, "training stalled after", "min", 15.0),
    # before the first step: preflight, burn-in and loading take time
    Threshold("startup_grace_s", "startup_grace_min", _MIN, "first step expected within", "min", 30.0),
    # consecutive failed scrapes of a node: critical
    Threshold("unreachable_after", "unreachable_after_rounds", _ONE, "node unreachable after", "rounds", 2),
    # a firing alert resolves once its condition is false this long
    Threshold("keep_firing_for_s", "keep_firing_for_min", _MIN, "alert resolves after false for", "min", 5.0),
    # the run's one cost cap (trainstack:run.max_cost_usd); 0: no projection rule
    Threshold("budget_usd", "budget_usd", _ONE, "projected run cost above", "USD", 0.0),
    # what the stack's resources cost, for the projection
    Threshold("cost_per_hour_usd", None, _ONE, "projection's price", "USD/h", 0.0),
    # the run's planned optimizer steps (0: projection from the run's hours)
    Threshold("total_steps", None, _ONE, None, "", 0),
    # the forecast's wall-clock hours (max_run_hours when no forecast)
    Threshold("planned_hours", None, _ONE, "projection's planned hours", "h", 0.0),
    # per GPU, from the GPU table; the idle rule's denominator
    Threshold("gpu_memory_bytes", None, _ONE, None, "", 80e9),
    # webhook rate limit; the rest are counted in the next message
    Threshold("max_messages_per_hour", "max_messages_per_hour", _ONE, "webhook messages at most", "/h", 20),
    # a golden-metrics digest this often (0: off)
    Threshold("digest_every_s", "digest_every_min", _MIN, "golden-metrics digest every", "min", 60.0),
)
BY_FIELD: dict[str, Threshold] = {t.field: t for t in THRESHOLDS}
BY_CONFIG_KEY: dict[str, Threshold] = {t.config_key: t for t in THRESHOLDS if t.config_key is not None}


def _default(name: str) -> Any:
    return BY_FIELD[name].rule_default


@dataclass(frozen=True)
class AlertRules:
    """Every threshold the aggregator applies; times in seconds, ratios in 0..1 (defaults: `THRESHOLDS`)."""

    interval_s: float = _default("interval_s")
    util_low_ratio: float = _default("util_low_ratio")
    util_low_for_s: float = _default("util_low_for_s")
    util_high_ratio: float = _default("util_high_ratio")
    util_high_for_s: float = _default("util_high_for_s")
    memory_idle_ratio: float = _default("memory_idle_ratio")
    memory_idle_for_s: float = _default("memory_idle_for_s")
    min_busbw_gb_per_s: float = _default("min_busbw_gb_per_s")
    nvme_p99_max_us: float = _default("nvme_p99_max_us")
    temperature_max_c: float = _default("temperature_max_c")
    stalled_after_s: float = _default("stalled_after_s")
    startup_grace_s: float = _default("startup_grace_s")
    unreachable_after: int = _default("unreachable_after")
    keep_firing_for_s: float = _default("keep_firing_for_s")
    budget_usd: float = _default("budget_usd")
    cost_per_hour_usd: float = _default("cost_per_hour_usd")
    total_steps: int = _default("total_steps")
    planned_hours: float = _default("planned_hours")
    gpu_memory_bytes: float = _default("gpu_memory_bytes")
    max_messages_per_hour: int = _default("max_messages_per_hour")
    digest_every_s: float = _default("digest_every_s")

    def __post_init__(self) -> None:
        missing = sorted({f.name for f in fields(self)} ^ set(BY_FIELD))
        if missing:
            raise RulesError(f"alerts.{missing[0]}: AlertRules and THRESHOLDS must list the same fields")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise RulesError(f"alerts.{f.name} must be a finite number, got {value!r}")
            if value < 0:
                raise RulesError(f"alerts.{f.name} must be >= 0, got {value!r}")
        for name in ("util_low_ratio", "util_high_ratio", "memory_idle_ratio"):
            if getattr(self, name) > 1:
                raise RulesError(f"alerts.{name} is a ratio in 0..1, got {getattr(self, name)!r}")
        if self.interval_s < 1:
            raise RulesError(f"alerts.interval_s must be at least 1 s, got {self.interval_s!r}")
        if self.util_low_ratio >= self.util_high_ratio:
            raise RulesError("alerts.util_low_ratio must be below alerts.util_high_ratio")

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> AlertRules:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            names = ", ".join(sorted(known))
            raise RulesError(f"alerts.{unknown[0]} is not a known key; known keys: {names}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> AlertRules:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RulesError(f"alerts.json is not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise RulesError("alerts.json must hold one JSON object")
        return cls.from_mapping(data)

    def as_output(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"
