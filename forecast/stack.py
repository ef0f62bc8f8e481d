"""The forecast input of a parsed stack config: its model section, its GPUs (from the GPU table), its prices.

A pool of pods (`topology: pods`) runs one job per pod, each over that pod's GPUs; an Instant Cluster runs
one job over every GPU. Prices are the GPU table's on-demand hint, as the config's own budget check uses
(`components.config_rules.estimate_cost_per_hour`); spot, where the stack asks for it, at its bid.
"""

from __future__ import annotations

from components.config import StackConfig
from facts.gpus import GPUS, GpuSpec
from facts.money import HOURS_PER_MONTH, SNAPSHOT
from forecast.compute import forecast
from forecast.model import Deployment, Forecast, ForecastInput, Hardware, Workload


def hardware(gpu: GpuSpec) -> Hardware:
    peaks = {"bf16": gpu.peak_tflops_bf16}
    if gpu.peak_tflops_fp8 is not None:
        peaks["fp8"] = gpu.peak_tflops_fp8
    return Hardware(name=gpu.key, memory_gb=gpu.memory_gb, peak_tflops=peaks)


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
    )
    spot = c.capacity in ("spot", "auto") and c.bid_per_gpu is not None
    deployment = Deployment(
        gpu=hardware(gpu),
        gpus_per_job=c.gpus_per_node if c.topology == "pods" else gpus,
        jobs=c.nodes if c.topology == "pods" else 1,
        compute_usd_per_hour=gpus * gpu.price_per_gpu_hour,
        spot_compute_usd_per_hour=gpus * (c.bid_per_gpu or 0.0) if spot else None,
        storage_usd_per_hour=SNAPSHOT.volume_monthly(c.volume_gb) / HOURS_PER_MONTH,
        max_run_hours=config.training.max_run_hours,
        burn_in_hours=config.training.burn_in_min / 60,
    )
    return ForecastInput(workload, deployment)


def stack_forecast(config: StackConfig) -> Forecast | None:
    """The stack's forecast; None without a model section."""
    inp = forecast_input(config)
    return None if inp is None else forecast(inp)
