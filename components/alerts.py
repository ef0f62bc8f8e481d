"""The stack's alert rules: its `trainstack:alerts` section with the figures only the whole stack knows (its
price, the forecast's hours, its all-reduce floor, its GPU's memory)."""

from __future__ import annotations

from facts.gpus import gpu_spec
from forecast.model import Forecast
from stackconfig.alerts import alert_rules
from stackconfig.config import StackConfig
from stackconfig.derived import run_cost_cap
from stackconfig.pricing import stack_price
from train.monitor.rules import AlertRules


def stack_alert_rules(config: StackConfig, fc: Forecast | None) -> AlertRules:
    """The stack's rules: its alerts section, price, busbw floor and the hours of its forecast `fc` (the
    component's own, `forecast.stack.stack_forecast`), else max_run_hours."""
    c, t = config.cluster, config.training
    gpu = gpu_spec(c.gpu_type)
    hours = fc.compute.hours if fc is not None else t.max_run_hours
    return alert_rules(
        config.alerts,
        cost_per_hour_usd=stack_price(config).usd_per_hour,
        planned_hours=hours,  # the whole run, every segment: what the budget is for
        min_busbw_gb_per_s=t.nccl_min_busbw_gb_per_s,
        gpu_memory_bytes=gpu.memory_gb * 1e9,
        budget_usd=run_cost_cap(config),  # the run's one cap (trainstack:run.max_cost_usd)
    )
