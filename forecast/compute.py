"""Training FLOPs, wall-clock hours, restarts and run cost; `forecast()` puts memory, time and money together.

FLOPs per job, T tokens (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
https://arxiv.org/abs/2001.08361, §2.1: a forward pass costs 2Ψ per token, the backward pass twice that):

    full training  6·Ψ·T
    LoRA           (4·Ψ + 6·Ψt)·T   the backward pass is half input gradients, half weight gradients
                                    (Narayanan et al. 2021, https://arxiv.org/abs/2104.04473, FLOPs
                                    appendix: "the backward pass requires double the number of FLOPs since
                                    we need to calculate the gradients with respect to both input and weight
                                    tensors");
                                    a frozen base still needs the input-gradient half (2Ψ) but not the weight
                                    half, the adapters need all three (6Ψt). Hu et al. 2021 (LoRA) report the
                                    same saving as 25 % faster training of GPT-3 175B.
    checkpointing  executed FLOPs add one recomputed forward pass, 2·(Ψ + Ψt_lora)·T; the model FLOPs
                   above, against which MFU is defined, do not change.

    Attention's own score FLOPs (6·L·s·h per token, Kaplan §2.1) are left out, as in the 6·N·T rule; at
    s = 4096 they add 4-8 % for 7B-70B models.

Time: GPU-seconds = model FLOPs / (dense peak[precision] x MFU), the peak from the GPU table (NVIDIA's
datasheets); wall clock = GPU-seconds / N x (1 + overhead), N the job's GPUs. MFU is model FLOPs per second
over peak (Chowdhery et al. 2022, PaLM, https://arxiv.org/abs/2204.02311, §4.1 and Table 3: GPT-3 21.3 %,
Gopher 32.5 %, Megatron-Turing NLG 30.2 %, PaLM 46.2 %). Unless the workload sets `mfu`, it is

    DEFAULT_HARDWARE_UTILISATION[precision] x model FLOPs / executed FLOPs

so activation checkpointing's recompute (8 instead of 6 FLOPs per parameter-token) lowers it to 0.30 for
bf16. bf16: 0.40 of peak, inside the range above. fp8: 0.26, an assumption: only the matmuls run in FP8,
so we count on 1.3x bf16's speed rather than the 2x of the peaks; set `mfu` once a run is measured.

Restarts: the watchdog stops a run after max_run_hours; segments = ceil(hours / max_run_hours), restarts =
segments - 1. Money: run cost = hours x (every GPU of the stack x its price + volumes' monthly price / 730);
with spot, the same at the bid.
"""

from __future__ import annotations

import math

from forecast.fixes import memory_fixes
from forecast.memory import memory
from forecast.model import ComputeForecast, CostForecast, Deployment, Forecast, ForecastInput, Workload
from providers.errors import TrainstackError

DEFAULT_HARDWARE_UTILISATION: dict[str, float] = {"bf16": 0.40, "fp8": 0.26}
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


def assumed_mfu(w: Workload) -> float:
    """The workload's `mfu`, or the default for its precision, lowered by checkpointing's recompute."""
    if w.mfu is not None:
        return w.mfu
    return DEFAULT_HARDWARE_UTILISATION[w.precision] * model_flops(w) / executed_flops(w)


def compute(w: Workload, d: Deployment) -> ComputeForecast:
    peak = d.gpu.peak_tflops.get(w.precision)
    if peak is None:
        supported = ", ".join(sorted(d.gpu.peak_tflops))
        raise ForecastError(f"{d.gpu.name} has no {w.precision} tensor cores; use one of: {supported}")
    mfu = assumed_mfu(w)
    flops = model_flops(w)
    rate = peak * 1e12 * mfu  # model FLOP/s per GPU
    gpu_hours = flops / rate / SECONDS_PER_HOUR
    ideal = gpu_hours / d.gpus_per_job
    hours = ideal * (1 + w.overhead)
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
    return Forecast(input=inp, memory=mem, compute=time, cost=cost(time.hours, d), fixes=fixes)
