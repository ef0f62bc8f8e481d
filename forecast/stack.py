"""The forecast input of a parsed stack config: its model section, its GPUs (from the GPU table), its prices.

A pool of pods (`topology: pods`) runs one job per pod, each over that pod's GPUs; an Instant Cluster runs
one job over every GPU. Prices are the stack's one hourly price (`stackconfig.pricing.stack_price`, what the
providers' check() and the budget checks use); spot, where the stack asks for it, at its bid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from facts.gpus import GPUS, GpuSpec
from facts.money import HOURS_PER_MONTH
from forecast.compute import forecast
from forecast.model import Deployment, Forecast, ForecastInput, Hardware, Workload
from stackconfig.config import StackConfig
from stackconfig.pricing import stack_price


def hardware(gpu: GpuSpec) -> Hardware:
    peaks = {"bf16": gpu.peak_tflops_bf16}
    if gpu.peak_tflops_fp8 is not None:
        peaks["fp8"] = gpu.peak_tflops_fp8
    return Hardware(
        name=gpu.key,
        memory_gb=gpu.memory_gb,
        peak_tflops=peaks,
        memory_bandwidth_tbps=gpu.memory_bandwidth_tbps,
    )


def forecast_input(config: StackConfig) -> ForecastInput | None:
    """The stack's forecast input; None when it declares no `training.model`."""
    m = config.training.model
    if m is None:
        return None
    c = config.cluster
    gpu = GPUS[c.gpu_type]
    gpus = c.nodes * c.gpus_per_node
    workload = Workload(
        parameters=m.parameters,
        tokens=m.tokens,
        method=m.method,
        trainable_fraction=1.0 if m.method == "full" else (m.trainable_fraction or 0.0),
        precision=m.precision,
        optimizer=m.optimizer,
        sharding=m.sharding,
        layers=m.layers,
        hidden_size=m.hidden_size,
        attention_heads=m.attention_heads,
        vocab_size=m.vocab_size,
        sequence_length=m.sequence_length,
        micro_batch_per_gpu=m.micro_batch_per_gpu,
        activation_checkpointing=m.activation_checkpointing,
        flash_attention=m.flash_attention,
        mfu=m.mfu,
        overhead=m.overhead,
        kv_heads=m.kv_heads,
        ffn_hidden_size=m.ffn_hidden_size,
    )
    price = stack_price(config)
    deployment = Deployment(
        gpu=hardware(gpu),
        gpus_per_job=c.gpus_per_node if c.topology == "pods" else gpus,
        jobs=c.nodes if c.topology == "pods" else 1,
        compute_usd_per_hour=price.compute_usd_per_hour,
        spot_compute_usd_per_hour=price.spot_compute_usd_per_hour,
        storage_usd_per_hour=price.storage_usd_per_month / HOURS_PER_MONTH,
        max_run_hours=config.training.max_run_hours,
        burn_in_hours=config.training.burn_in_min / 60,
    )
    return ForecastInput(workload, deployment)


def stack_forecast(config: StackConfig) -> Forecast | None:
    """The stack's forecast; None without a model section."""
    inp = forecast_input(config)
    return None if inp is None else forecast(inp)


Basis = Literal["forecast", "max_run_hours"]


@dataclass(frozen=True)
class RunCost:
    """The stack's one run cost, with what it is based on (a figure is never shown without it)."""

    usd: float
    hours: float
    basis: Basis

    @property
    def label(self) -> str:
        if self.basis == "forecast":
            return f"forecast: {self.hours:,.1f} h of training"
        return f"$/h x max_run_hours ({self.hours:g} h; no training.model to forecast)"


def run_cost(config: StackConfig) -> RunCost:
    """The forecast's run cost when the stack declares `training.model` (hours the model needs x the price),
    otherwise the one hourly price x `training.max_run_hours` (the most the watchdog lets one run last)."""
    fc = stack_forecast(config)
    if fc is not None:
        return RunCost(round(fc.cost.run_usd, 2), fc.compute.hours, "forecast")
    hours = config.training.max_run_hours
    return RunCost(round(stack_price(config).usd_per_hour * hours, 2), hours, "max_run_hours")
