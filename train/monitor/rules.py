"""Alert thresholds: one frozen record, read from the `alerts.json` the cluster component delivers.

The stack config's `trainstack:alerts` (stackconfig/alerts.py validates it at preview, key by key) is
rendered into `alerts.json` beside the start scripts; the aggregator on node 0 and `scripts/watch` read it
with `AlertRules.from_json`, and the Prometheus rules file is rendered from the same values, so a threshold
is written in one place. Defaults follow the golden-metrics practice of the source article (GPU utilisation
healthy at 75-95 %, NVMe latency under 100 us, temperature under 85 C) and NVIDIA's guidance that any XID or
uncorrected ECC error needs attention (NVIDIA, "XID Errors", docs.nvidia.com/deploy/xid-errors).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any


class RulesError(ValueError):
    """alerts.json breaks a rule; the message names the key."""


@dataclass(frozen=True)
class AlertRules:
    """Every threshold the aggregator applies; times in seconds, ratios in 0..1."""

    interval_s: float = 300.0  # scrape + evaluate every 5 minutes (the article's cadence)
    util_low_ratio: float = 0.70  # below this, sustained: the input pipeline or CPU starves the GPUs
    util_low_for_s: float = 900.0
    util_high_ratio: float = 0.95  # above this for 10 min: memory pressure / no headroom
    util_high_for_s: float = 600.0
    memory_idle_ratio: float = 0.10  # GPU memory use below this for 5 min: the GPU is idle
    memory_idle_for_s: float = 300.0
    min_busbw_gb_per_s: float = 0.0  # all-reduce bus bandwidth floor, GB/s (0: no rule)
    nvme_p99_max_us: float = 100.0  # p99 of small synced writes on the checkpoint volume
    temperature_max_c: float = 85.0
    stalled_after_s: float = 900.0  # no new training step for this long: critical
    startup_grace_s: float = 1800.0  # before the first step: preflight, burn-in and loading take time
    unreachable_after: int = 2  # consecutive failed scrapes of a node: critical
    keep_firing_for_s: float = 300.0  # a firing alert resolves once its condition is false this long
    budget_usd: float = 0.0  # the run's budget (max_run_cost_usd); 0: no projection rule
    cost_per_hour_usd: float = 0.0  # what the stack's resources cost, for the projection
    total_steps: int = 0  # the run's planned optimizer steps (0: projection from the run's hours)
    planned_hours: float = 0.0  # the forecast's wall-clock hours (max_run_hours when no forecast)
    gpu_memory_bytes: float = 80e9  # per GPU, from the GPU table; the idle rule's denominator
    max_messages_per_hour: int = 20  # webhook rate limit; the rest are counted in the next message
    digest_every_s: float = 3600.0  # a golden-metrics digest this often (0: off)

    def __post_init__(self) -> None:
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
