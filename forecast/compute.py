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

Time: seconds per token per GPU = executed FLOPs per token / (dense peak[precision] x U), the peak from
the GPU table (NVIDIA's datasheets), plus LoRA's adapter term below (bf16 LoRA on a Llama block times its
frozen base in two terms instead of at U: "LoRA's frozen base" below); wall clock = tokens x that / N x
(1 + overhead), N the job's GPUs. MFU, reported, is model FLOPs per second over peak (Chowdhery et al.
2022, PaLM, https://arxiv.org/abs/2204.02311, §4.1 and Table 3: GPT-3 21.3 %, Gopher 32.5 %,
Megatron-Turing NLG 30.2 %, PaLM 46.2 %). Unless the workload sets `mfu`, the utilisation of executed FLOPs is

    U = DEFAULT_HARDWARE_UTILISATION[precision]
        x min(1, h / 2048) ** 0.5                   (small hidden sizes)
        x 1 / (1 + (1/3)·(1024/h)²·(16384/(s·b)))   under zero3 (FSDP full shard's per-layer cost)
        x 0.87                                      LoRA without activation checkpointing (at U)

so activation checkpointing's recompute (8 instead of 6 FLOPs per parameter-token) gives an MFU of
0.45 x 6/8 = 0.34 for bf16. bf16: 0.45 of peak, measured on one H200 (docs/GPU-VALIDATION.md, "LoRA on
H200", 2026-12-01, Hugging Face Llama shapes, s = 2048, s·b = 8192-16384): executed FLOPs ran at 0.46 of
peak (7B frozen base, checkpointed), 0.47 (1.5B frozen base; 1.5B full fine-tune, checkpointed), 0.43 (3B
full, checkpointed), 0.40 (1.5B full, not checkpointed: its optimizer step and weight casts are in the
step); the 0.40 assumed before (inside PaLM's range) read every LoRA run 7-21 % slow once the adapter term
below was added. fp8: 1.3x bf16's speed, an assumption (only the matmuls run in FP8): 0.45 x 1.3 / 2 of
the FP8 peak; set `mfu` once a run is measured.

Corrections, from measured runs on H200 (docs/GPU-VALIDATION.md):
- Small hidden sizes do not fill the tensor cores: a GEMM's arithmetic intensity grows with its dimensions
  and small ones are memory- or latency-bound (NVIDIA, "Matrix Multiplication Background User's Guide",
  https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html). Measured
  MFU: h = 768 (GPT-2 124 M) 0.24, h = 1024 (350 M) 0.30-0.31 under DDP ("The transformer on H200"), while
  h = 2048 (the 1.5B Llama shape) already ran at the 7B's rate. (h / 2048) ** 0.5 (0.61 and 0.71 at 768
  and 1024) holds all of them; it was (h / 4096) ** 0.25, fitted to the two GPT-2 points alone, which read
  the 1.5B runs 1.2-1.4x slow.
- zero3 gathers every layer's weights in the forward and again in the backward pass and reduce-scatters the
  gradients: 1.5x the data-parallel communication (Rajbhandari et al. 2020, ZeRO, §7.2.2), partly exposed
  in the step. Measured: 350 M on 2 GPUs (NVLink), FSDP full shard 104,762 tokens/s per GPU against DDP's
  139,677: 0.75, i.e. an exposed cost of 1/3 of the layer's compute, about 1.6 ms per layer per step. That
  is not bandwidth (a 1024-wide layer's 25 MB gather takes ~0.1 ms over NVLink) but a per-layer cost of
  launching and synchronising the collectives, so it is assumed fixed per layer while the layer's compute
  grows as h²·s·b: the exposed share is (1/3)·(1024/h)²·(16384/(s·b)), 8 % for an 8B model (h = 4096) at
  s·b = 4096, 2 % at s·b = 16384. One measurement, an assumption beyond it; `overhead` still adds the
  run's other stops on top.
- LoRA: the frozen base's backward still computes input gradients through every layer (the 4·Ψ above, and
  the recompute under checkpointing), at the same U as a full fine-tune (measured: a frozen base with no
  adapters ran its executed FLOPs at 0.46-0.47 of peak, as the full fine-tune did). The adapters add far
  more time than their 6·Ψt FLOPs: each adapted projection runs two skinny GEMMs (inner dimension r), a
  scaling, an add into the base's output and, backward, the matching passes and an add into the input
  gradient, all bound by memory traffic over the projection's input and output width, not by the rank.
  Measured: rank 16 and rank 64 ran at the same speed (7B: 8,249 and 8,228 tokens/s; 1.5B: 35,183 and
  35,160), and the time LoRA adds to the frozen base is 60.8 (7B) and 60.7 (1.5B) bytes of HBM traffic per
  token per element of adapted width, at the datasheet's 4.8 TB/s, checkpointed; without checkpointing,
  whose recompute runs the adapters' forward a second time, 40. Measured as LoRA less its frozen base, same
  shape, micro-batch and call ("LoRA on H200" and "The 8B frozen base", bench/gpu_lora8b.py): checkpointed
  60.7 (1.5B), 59.8 (3B), 60.8 and 61.8 (7B), 64.0 (8B); not checkpointed 42.9 (1.5B), 39.6 (3B), 37.2
  (7B), 41.4 and 37.3 (8B):

      adapter seconds per token = B x L x W / HBM bandwidth,   B = 61 checkpointed, 40 not,
                                                               W = (Ψ - 2·V·h) / (L·h) + 7·h

  W is the summed input and output width of a Llama block's seven projections (q, k, v, o, gate, up,
  down), all adapted (peft's "all-linear"): with P = Ψ/L per block, Σ(in + out) = P/h + 7h whatever the
  key-value heads (78,080 for Llama-2-7B, 44,032 for the 1.5B shape: both exact). Adapters on fewer
  projections cost less; the forecast then errs slow. Embeddings are taken as untied (2·V·h).
- LoRA's frozen base, bf16, Llama block: matmuls + attention + elementwise HBM traffic, not one U. The 8B
  frozen base ran its 6·Ψ at 0.529 of peak, the 7B's at 0.459, while their kernel profiles ran the matrix
  multiplies at the same 811-813 TFLOP/s (0.82 of peak); the rest of the step is elementwise work that
  grows with a layer's widths, not its FLOPs (docs/GPU-VALIDATION.md, "The 8B frozen base" and "Two terms
  for the frozen base"). So

      seconds per token = M / (0.82 x peak) + A / (0.435 x peak) + E / HBM bandwidth
      M = 2·P·L per pass (forward, recompute, input gradient) + 4·V·h (LM head), P = (Ψ - 2·V·h) / L
      A = 2·s·h·L per causal forward, 2.5x that backward (Dao 2023, FlashAttention-2,
          https://arxiv.org/abs/2307.08691, §4.1)
      E = L·(761·h + 304·kv + 82·F) (x 0.87 without checkpointing) + 57·V bytes

  0.435: the attention kernels' rate in the same profiles (0.43 and 0.45). The bytes are step-time
  differences at the datasheet's 4.8 TB/s of the 8B against its one-factor variants (32 key-value heads:
  304 per element of kv width; FFN 11008: 82 per FFN element; V 32000: 57 per vocabulary entry), 761 per
  element of h the rest of the 8B's own step; 0.87 the elementwise time of five frozen bases without
  checkpointing against with it (0.85-0.90). Measured, not counted: a count of Hugging Face's unfused ops
  reaches 0.55-0.65 of the h and F figures. Held out: the 7B frozen base lands within 1 %, 1.5B and 3B
  read 5-8 % slow, since the workload carries no key-value heads and kv is taken as h (F = (P - 4h²)/3h).
  The small-hidden and zero3 shares divide this time as they scale U. Every LoRA run measured on H200
  reads 1.00-1.08 (one U: 0.92-1.18).
- LoRA without activation checkpointing, at U (fp8, or a GPT block): the frozen base's 4·Ψ executed FLOPs
  ran at 0.87 of the rate the checkpointed base ran its 6·Ψ at (per FLOP, the recomputed forward is
  cheaper than the rest of the step),
  frozen bases without adapters, same shape and call ("The 8B frozen base"): 0.869 (7B), 0.866 (3B), 0.871
  and 0.887 (8B), 0.837 (1.5B, two calls). Full fine-tunes are not scaled: the small-hidden correction was
  drawn from GPT-2 runs without checkpointing (docs/FORECAST.md says why).
A workload's own `mfu` replaces all of this (a measured MFU already holds its communication).

Restarts: the watchdog stops a run after max_run_hours; segments = ceil(hours / max_run_hours), restarts =
segments - 1. Money: run cost = hours x the stack price (stackconfig/pricing.py: GPUs + volume and disks /
730);
with spot, the same at the bid.
"""

from __future__ import annotations

import math

from common.errors import TrainstackError
from forecast.fixes import memory_fixes
from forecast.memory import memory
from forecast.model import ComputeForecast, CostForecast, Deployment, Forecast, ForecastInput, Workload

BF16_UTILISATION = 0.45  # executed FLOPs / peak, measured on H200 (docs/GPU-VALIDATION.md, "LoRA on H200")
FP8_SPEEDUP = 1.3  # assumed: only the matmuls run in FP8
DEFAULT_HARDWARE_UTILISATION: dict[str, float] = {
    "bf16": BF16_UTILISATION,
    "fp8": BF16_UTILISATION * FP8_SPEEDUP / 2,  # of the FP8 peak, twice the bf16 one
}
FULL_UTILISATION_HIDDEN = 2048  # hidden size from which the default applies unscaled
SMALL_HIDDEN_EXPONENT = 0.5  # holds H200 runs at h = 768, 1024 and 2048 (docs/GPU-VALIDATION.md)
# LoRA: HBM bytes per token per element of adapted width, with and without activation checkpointing (whose
# recompute runs the adapters' forward pass again): LoRA less its frozen base, same shape and batch
# (docs/GPU-VALIDATION.md, "LoRA on H200" and "The 8B frozen base"): checkpointed 60.7 (1.5B), 59.8 (3B),
# 60.8 and 61.8 (7B), 64.0 (8B), rank 16 = rank 64; not checkpointed 42.9 (1.5B), 39.6 (3B), 37.2 (7B),
# 41.4 and 37.3 (8B). And the width of a Llama block's seven projections beyond P/h.
ADAPTER_BYTES = {True: 61.0, False: 40.0}  # keyed by activation_checkpointing
# LoRA without checkpointing: its frozen base's executed FLOPs (4Ψ) ran at 0.87 of the rate the checkpointed
# base ran its 6Ψ at, same shape, same machine (same document): 0.869 (7B), 0.866 (3B), 0.871 and 0.887 (8B),
# 0.837 (1.5B, two calls).
NO_RECOMPUTE_SHARE = 0.87
ADAPTED_PROJECTIONS_EXTRA = 7
# LoRA's frozen base (bf16, Llama block) as two terms, from the kernel profiles of the 8B and 7B frozen bases
# (docs/GPU-VALIDATION.md, "The 8B frozen base" and "Two terms for the frozen base"): the matrix multiplies,
# counted per product, ran at 811 and 813 TFLOP/s (0.82 of the 989.4 peak), the attention kernels at 0.43 and
# 0.45 of peak (47 and 45 ms a step), and the rest is elementwise and memory-bound work, HBM bytes per token:
# per layer 761 per element of hidden width, 304 per element of key-value width, 82 per element of FFN width,
# and 57 per vocabulary entry for the loss, each the step-time difference of a one-factor variant of the 8B
# (32 key-value heads; FFN 11008; vocabulary 32000) at the datasheet's 4.8 TB/s, the hidden one the
# remainder of the 8B's own step. Without checkpointing the elementwise bytes are 0.87 of them (0.85-0.90,
# five frozen bases).
MATMUL_UTILISATION = 0.82
ATTENTION_UTILISATION = 0.435
BASE_BYTES = {"hidden": 761.0, "kv": 304.0, "ffn": 82.0, "vocab": 57.0}
BASE_BYTES_NO_RECOMPUTE = 0.87
ATTENTION_BACKWARD = 2.5  # backward FLOPs / forward (Dao 2023, FlashAttention-2, §4.1: 5 matmuls to 2)
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


def utilisation(w: Workload) -> float:
    """U: the share of the dense peak executed FLOPs run at, scaled for a small hidden size and zero3."""
    recompute = NO_RECOMPUTE_SHARE if w.method == "lora" and not w.activation_checkpointing else 1.0
    return DEFAULT_HARDWARE_UTILISATION[w.precision] * _size_share(w) * _sharding_share(w) * recompute


def adapted_width(w: Workload) -> float:
    """Σ(in + out) of a Llama block's seven projections: P/h + 7h with P = (Ψ - 2·V·h) / L."""
    h = w.hidden_size
    per_block = max(0.0, w.parameters - 2.0 * w.vocab_size * h) / w.layers
    return per_block / h + ADAPTED_PROJECTIONS_EXTRA * h


def adapter_seconds_per_token(w: Workload, bandwidth_tbps: float) -> float:
    """LoRA's memory-bound adapter passes, per token per GPU; 0 for a full fine-tune."""
    if w.method != "lora":
        return 0.0
    return ADAPTER_BYTES[w.activation_checkpointing] * w.layers * adapted_width(w) / (bandwidth_tbps * 1e12)


def two_terms(w: Workload) -> bool:
    """LoRA on a bf16 Llama block: its frozen base is timed as matmuls + attention + HBM traffic, not at U."""
    return w.method == "lora" and w.precision == "bf16" and w.block == "llama"


def frozen_base_seconds_per_token(w: Workload, peak_tflops: float, bandwidth_tbps: float) -> float:
    """LoRA's frozen base, per token per GPU: matmul FLOPs counted per product at MATMUL_UTILISATION of the
    peak, attention's at ATTENTION_UTILISATION, and the elementwise bytes (BASE_BYTES) at HBM bandwidth.

    Per token: each block's projections 2·P per pass (forward, the recompute under checkpointing, the input
    gradient), the LM head 2·V·h forward and input gradient (Hugging Face checkpoints only the decoder
    layers), the input embedding none (a lookup); causal attention 2·s·h per layer forward, 2.5x that
    backward. The workload does not carry the key-value heads, so the key-value width is taken as h (full
    multi-head attention; grouped-query attention moves less, and the forecast errs slow) and the FFN width
    is what the block's parameters leave: F = (P - 4h²) / 3h.
    """
    h, layers, vocab, ckpt = w.hidden_size, w.layers, w.vocab_size, w.activation_checkpointing
    per_block = max(0.0, w.parameters - 2.0 * vocab * h) / layers
    passes = 3 if ckpt else 2
    matmul = 2.0 * passes * layers * per_block + 4.0 * vocab * h
    attention = 2.0 * w.sequence_length * h * layers * (1 + int(ckpt) + ATTENTION_BACKWARD)
    ffn = max(0.0, per_block - 4.0 * h * h) / (3.0 * h)
    per_layer = BASE_BYTES["hidden"] * h + BASE_BYTES["kv"] * h + BASE_BYTES["ffn"] * ffn
    elementwise = (
        layers * per_layer * (1.0 if ckpt else BASE_BYTES_NO_RECOMPUTE) + BASE_BYTES["vocab"] * vocab
    )
    peak = peak_tflops * 1e12
    seconds = matmul / (peak * MATMUL_UTILISATION) + attention / (peak * ATTENTION_UTILISATION)
    seconds += elementwise / (bandwidth_tbps * 1e12)
    return seconds / (_size_share(w) * _sharding_share(w))


def _size_share(w: Workload) -> float:
    return math.pow(min(1.0, w.hidden_size / FULL_UTILISATION_HIDDEN), SMALL_HIDDEN_EXPONENT)


def _sharding_share(w: Workload) -> float:
    if w.sharding != "zero3":
        return 1.0
    layer = w.hidden_size**2 * w.sequence_length * w.micro_batch_per_gpu
    return 1.0 / (1.0 + ZERO3_EXPOSED_SHARE * ZERO3_MEASURED_LAYER / layer)


def seconds_per_token(w: Workload, peak_tflops: float, bandwidth_tbps: float) -> float:
    """One GPU's time per token: executed FLOPs at U, or LoRA's frozen base in two terms, plus LoRA's
    adapters; a given `mfu` replaces all of it."""
    if w.mfu is not None:
        return model_flops(w) / w.tokens / (peak_tflops * 1e12 * w.mfu)
    if two_terms(w):
        base = frozen_base_seconds_per_token(w, peak_tflops, bandwidth_tbps)
    else:
        base = executed_flops(w) / w.tokens / (peak_tflops * 1e12 * utilisation(w))
    return base + adapter_seconds_per_token(w, bandwidth_tbps)


def assumed_mfu(w: Workload, peak_tflops: float = 989.4, bandwidth_tbps: float = 3.35) -> float:
    """The workload's `mfu`, or the MFU the default utilisation and LoRA's adapter term imply (which
    depends on the GPU only for LoRA: its adapter passes are bound by HBM bandwidth, not the peak)."""
    if w.mfu is not None:
        return w.mfu
    return (
        model_flops(w) / w.tokens / seconds_per_token(w, peak_tflops, bandwidth_tbps) / (peak_tflops * 1e12)
    )


def compute(w: Workload, d: Deployment) -> ComputeForecast:
    peak = d.gpu.peak_tflops.get(w.precision)
    if peak is None:
        supported = ", ".join(sorted(d.gpu.peak_tflops))
        raise ForecastError(f"{d.gpu.name} has no {w.precision} tensor cores; use one of: {supported}")
    mfu = assumed_mfu(w, peak, d.gpu.memory_bandwidth_tbps)
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
