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

    x min(1, h / 4096) ** 0.25                      (small hidden sizes)
    x 1 / (1 + (1/3)·(1024/h)²·(16384/(s·b)))         under zero3 (FSDP full shard's per-layer cost)

so activation checkpointing's recompute (8 instead of 6 FLOPs per parameter-token) lowers it to 0.30 for
bf16. bf16: 0.40 of peak, inside the range above. fp8: 0.26, an assumption: only the matmuls run in FP8,
so we count on 1.3x bf16's speed rather than the 2x of the peaks; set `mfu` once a run is measured.

Two corrections, from measured runs on H200 (docs/GPU-VALIDATION.md, "The transformer on H200", GPT-style
decoders, s = 1024, b = 16, bf16; MFU by this module's 6·Ψ count):
- Small hidden sizes do not fill the tensor cores: a GEMM's arithmetic intensity grows with its dimensions
  and small ones are memory- or latency-bound (NVIDIA, "Matrix Multiplication Background User's Guide",
  https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html). Measured:
  h = 768 (124 M) 0.24, h = 1024 (350 M) 0.30-0.31 under DDP. The factor (h / 4096) ** 0.25 (0.66 and 0.71)
  is fitted to those two points and leaves h >= 4096 (7B and up, where 0.40 came from) unchanged.
- zero3 gathers every layer's weights in the forward and again in the backward pass and reduce-scatters the
  gradients: 1.5x the data-parallel communication (Rajbhandari et al. 2020, ZeRO, §7.2.2), partly exposed
  in the step. Measured: 350 M on 2 GPUs (NVLink), FSDP full shard 104,762 tokens/s per GPU against DDP's
  139,677: 0.75, i.e. an exposed cost of 1/3 of the layer's compute, about 1.6 ms per layer per step. That
  is not bandwidth (a 1024-wide layer's 25 MB gather takes ~0.1 ms over NVLink) but a per-layer cost of
  launching and synchronising the collectives, so it is assumed fixed per layer while the layer's compute
  grows as h²·s·b: the exposed share is (1/3)·(1024/h)²·(16384/(s·b)), 8 % for an 8B model (h = 4096) at
  s·b = 4096, 2 % at s·b = 16384. One measurement, an assumption beyond it; `overhead` still adds the
  run's other stops on top.
A workload's own `mfu` replaces all of this (a measured MFU already holds its communication).

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
FULL_UTILISATION_HIDDEN = 4096  # hidden size from which the default applies unscaled
SMALL_HIDDEN_EXPONENT = 0.25  # fitted to H200 runs at h = 768 and 1024 (docs/GPU-VALIDATION.md)
# zero3: exposed per-layer cost / the layer's compute, measured 1/3 (FSDP full shard / DDP per-GPU rate 0.75)
# for 350 M on 2 H200s (same document) at h = 1024, s·b = 16384; scaled by the layer's compute h²·s·b.
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


def assumed_mfu(w: Workload) -> float:
    """The workload's `mfu`, or the default for its precision, scaled for a small hidden size and zero3's
    gathers and lowered by checkpointing's recompute."""
    if w.mfu is not None:
        return w.mfu
    size = math.pow(min(1.0, w.hidden_size / FULL_UTILISATION_HIDDEN), SMALL_HIDDEN_EXPONENT)
    sharding = 1.0
    if w.sharding == "zero3":
        layer = w.hidden_size**2 * w.sequence_length * w.micro_batch_per_gpu
        sharding = 1.0 / (1.0 + ZERO3_EXPOSED_SHARE * ZERO3_MEASURED_LAYER / layer)
    base = DEFAULT_HARDWARE_UTILISATION[w.precision] * size * sharding
    return base * model_flops(w) / executed_flops(w)


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
    return Forecast(input=inp, memory=mem, compute=time, cost=cost(time.hours, d), fixes=fixes)
