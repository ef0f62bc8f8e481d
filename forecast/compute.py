"""Training FLOPs, wall-clock hours, restarts and run cost; `forecast()` puts memory, time and money together.

FLOPs per job, T tokens (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
https://arxiv.org/abs/2001.08361, §2.1: a forward pass costs 2Ψ per token, the backward pass twice that):

    full training  6·Ψ·T
    LoRA           (4·Ψ + 6·Ψt)·T   the backward pass is half input gradients, half weight gradients
                                    (Narayanan et al. 2021, https://arxiv.org/abs/2104.04473); a frozen base
                                    needs the input-gradient half only, the adapters all three
    checkpointing  executed FLOPs add one recomputed forward pass, 2·(Ψ + Ψt_lora)·T; the model FLOPs
                   above, against which MFU is defined, do not change.

Time: one compute model for every method (forecast/step.py, docs/FORECAST.md "Step time"): a micro-batch
step's seconds on one GPU as matmuls per GEMM shape (a small roofline on m, n, k, the precision's peak and
HBM bandwidth), attention, elementwise and optimizer bytes at HBM bandwidth, LoRA's adapter passes, the
host's launch latency where it binds, and zero3's exposed collectives; the constants fitted to 66 runs on
one H200 and judged on the shapes left out. Seconds per token = step / (s·b); wall clock = tokens x that /
N x (1 + overhead) + burn-in. MFU, reported, is model FLOPs per second over peak (Chowdhery et al. 2022,
PaLM, https://arxiv.org/abs/2204.02311). A workload's own `mfu` replaces the model (a measured MFU already
holds its communication).

zero3 gathers every layer's weights in the forward and again in the backward pass and reduce-scatters the
gradients: 1.5x the data-parallel communication (Rajbhandari et al. 2020, ZeRO, §7.2.2), partly exposed.
Measured: 350 M on 2 H200s (NVLink), FSDP full shard 104,762 tokens/s per GPU against DDP's 139,677: 0.75,
an exposed cost of 1/3 of the layer's compute, assumed fixed per layer while the layer's compute grows as
h²·s·b: the exposed share is (1/3)·(1024/h)²·(16384/(s·b)). One measurement, an assumption beyond it.

Restarts: the watchdog stops a run after max_run_hours; segments = ceil(hours / max_run_hours), restarts =
segments - 1. Money: run cost = hours x the stack price (stackconfig/pricing.py: GPUs + volume and disks /
730); with spot, the same at the bid.
"""

from __future__ import annotations

import math

from common.errors import TrainstackError
from forecast.fixes import memory_fixes
from forecast.memory import memory
from forecast.model import (
    ComputeForecast,
    CostForecast,
    Deployment,
    Forecast,
    ForecastInput,
    Hardware,
    Workload,
)
from forecast.step import StepParts, assumed, step_parts

# zero3: exposed per-layer cost / the layer's compute, measured 1/3 (FSDP full shard / DDP per-GPU rate 0.75)
# for 350 M on 2 H200s (docs/journal/2026-11-30-gpu.md) at h = 1024, s·b = 16384; scaled by the layer's
# h²·s·b.
ZERO3_EXPOSED_SHARE = 1.0 / 3.0
ZERO3_MEASURED_LAYER = 1024**2 * 16384  # h² x s·b of the measured run
SECONDS_PER_HOUR = 3600.0


class ForecastError(TrainstackError, ValueError):
    """The input cannot be forecast (e.g. a precision the GPU has no tensor cores for)."""


def _stored(w: Workload) -> float:
    """Parameters the forward pass multiplies by: the base plus LoRA's adapters."""
    return w.parameters * (1 + w.trainable_fraction) if w.method == "lora" else w.parameters


def model_flops(w: Workload) -> float:
    """FLOPs the training run needs (6·Ψ·T, or LoRA's (4·Ψ + 6·Ψt)·T)."""
    if w.method == "full":
        return 6.0 * w.parameters * w.tokens
    return (4.0 * w.parameters + 6.0 * w.parameters * w.trainable_fraction) * w.tokens


def executed_flops(w: Workload) -> float:
    """Model FLOPs plus the forward pass activation checkpointing recomputes."""
    recompute = 2.0 * _stored(w) * w.tokens if w.activation_checkpointing else 0.0
    return model_flops(w) + recompute


def sharding_share(w: Workload) -> float:
    """The share of a step zero3's exposed collectives leave to compute (1 for the other modes)."""
    if w.sharding != "zero3":
        return 1.0
    layer = w.hidden_size**2 * w.sequence_length * w.micro_batch_per_gpu
    return 1.0 / (1.0 + ZERO3_EXPOSED_SHARE * ZERO3_MEASURED_LAYER / layer)


def step(w: Workload, gpu: Hardware, gpus: int = 1) -> StepParts:
    """One micro-batch step on one GPU of the job, by part (forecast/step.py)."""
    return step_parts(w, gpu, sharding_share(w), gpus=gpus)


def seconds_per_token(w: Workload, gpu: Hardware, gpus: int = 1) -> float:
    """One GPU's time per token: the step model, or the workload's own `mfu`."""
    peak = gpu.peak_tflops[w.precision]
    if w.mfu is not None:
        return model_flops(w) / w.tokens / (peak * 1e12 * w.mfu)
    return step(w, gpu, gpus).total / (w.sequence_length * w.micro_batch_per_gpu)


def compute(w: Workload, d: Deployment) -> ComputeForecast:
    peak = d.gpu.peak_tflops.get(w.precision)
    if peak is None:
        supported = ", ".join(sorted(d.gpu.peak_tflops))
        raise ForecastError(f"{d.gpu.name} has no {w.precision} tensor cores; use one of: {supported}")
    flops = model_flops(w)
    rate = flops / w.tokens / seconds_per_token(w, d.gpu, d.gpus_per_job)  # model FLOP/s per GPU
    mfu = rate / (peak * 1e12)
    gpu_hours = flops / rate / SECONDS_PER_HOUR
    ideal = gpu_hours / d.gpus_per_job
    # Burn-in runs once on new nodes (the start script skips it for nodes that passed it in this run).
    hours = ideal * (1 + w.overhead) + d.burn_in_hours
    segments = max(1, math.ceil(round(hours / d.max_run_hours, 9)))
    return ComputeForecast(
        model_flops=flops,
        executed_flops=executed_flops(w),
        mfu=mfu,
        effective_tflops_per_gpu=peak * mfu,
        tokens_per_gpu_second=rate / (flops / w.tokens),
        gpu_hours=gpu_hours,
        ideal_hours=ideal,
        hours=hours,
        segments=segments,
        restarts=segments - 1,
    )


def cost(hours: float, d: Deployment) -> CostForecast:
    per_hour = d.compute_usd_per_hour + d.storage_usd_per_hour
    spot = d.spot_compute_usd_per_hour
    spot_per_hour = None if spot is None else spot + d.storage_usd_per_hour
    return CostForecast(
        usd_per_hour=per_hour,
        run_usd=hours * per_hour,
        spot_usd_per_hour=spot_per_hour,
        spot_run_usd=None if spot_per_hour is None else hours * spot_per_hour,
    )


def forecast(inp: ForecastInput) -> Forecast:
    """Memory per GPU, time and cost of the run; `fixes` lists what would make a misfit fit."""
    w, d = inp.workload, inp.deployment
    mem = memory(w, d.gpu, d.gpus_per_job)
    time = compute(w, d)
    fixes = () if mem.fits else memory_fixes(w, d)
    notes = assumed(w) if w.mfu is None else ()
    return Forecast(input=inp, memory=mem, compute=time, cost=cost(time.hours, d), fixes=fixes, assumed=notes)
