"""One compute model for every method: a training step's time from its shapes, in parts.

Full fine-tunes, LoRA and frozen layers, bf16 and fp8, checkpointed or not, are all one sum of seconds per
micro-batch step on one GPU (docs/FORECAST.md, "Step time"):

    matmul       Σ over the step's GEMMs (forecast.shapes) of  2·m·n·k / (U_mm · peak)
                                                           +  B_mm · 2·(m·k + k·n + m·n) / bandwidth
                 a small roofline: the FLOPs at a share of the precision's peak plus the operands' bytes
                 at HBM bandwidth, so narrow or short GEMMs run further from peak than wide ones. Passes:
                 forward, input gradient, the weight gradient where the weights train (full), and a layer's
                 forward again under checkpointing (Hugging Face recomputes decoder layers, not the head)
    attention    causal FlashAttention, 2·s·h FLOPs per token per layer forward, 2.5x that backward
                 (Dao 2023, FlashAttention-2, arXiv:2307.08691, §4.1), forward again when checkpointed,
                 at the bf16 peak / C_att
    elementwise  tokens x (L·(761·h + 304·kv + 82·F)·(1, or 0.87 without the recompute) + 57·V) bytes
                 x C_el at HBM bandwidth: norms, rotary, residuals, SiLU, the loss (the per-element
                 weights are the frozen-base step differences of the LoRA runs, docs/FORECAST.md)
    optimizer    trainable parameters (÷ N under zero1-3) x C_opt bytes at HBM bandwidth: AdamW's reads and
                 writes, the weights' casts to bf16, the fp32 gradients; once per micro-batch step
    adapters     LoRA only: 61 (checkpointed) or 40 bytes per token per element of adapted width
    latency      the host's time: C_host x (kernels x t_kernel + checkpointed layers x t_ckpt + peft layers
                 x t_peft), the kernels a step launches counted per layer (HOST_KERNELS). The host runs
                 ahead of the GPU, but the optimizer step is launched last, so the step is the longer of
                 the GPU's parts and the host's time plus the optimizer's: this part is what that adds
    recompute    (reported) the part of the above checkpointing adds
    communication zero3's exposed per-layer collectives (forecast.compute's share, unchanged)

The constants C (STEP_CONSTANTS) are fitted by least squares on relative error to the 66 H200 runs of
docs/gpu-validation/2026-12-03-h200-sweep (bench/fit_sweep.py refits them and reports the error on each
shape left out); the host's (HOST_KERNELS, HOST_SECONDS) to the 28 runs of
docs/gpu-validation/2026-12-03-h200-host, which read the host's time and the kernels directly.
"""

from __future__ import annotations

from typing import NamedTuple

from forecast import shapes
from forecast.model import Hardware, Workload
from forecast.shapes import ffn_width, gemms, kv_width

# Fitted by `python -m bench.fit_sweep '{"elementwise": 1.0}'` to all 66 runs of
# docs/gpu-validation/2026-12-03-h200-sweep (sweep.json: call 1, runs 0-39; sweep2.json: call 2, runs 0-25;
# one H200, widths 1024-8192), least squares on relative step time; the elementwise scale is held at 1 (its
# per-element bytes were measured as LoRA step differences, and fitted freely it trades against the
# GEMM bytes, which carry the same widths). `host` is a grid search: the scale of the host's time
# (HOST_SECONDS, measured on a later call's host) on the sweep's two calls; the GPU constants are fitted on
# the runs whose host time is under 0.7 of the step. docs/FORECAST.md "Step time" has the error on the
# shapes left out.
STEP_CONSTANTS: dict[str, float] = {
    "matmul_flops": 1.167878,  # 1 / U_mm: the GEMMs' FLOPs at 0.86 of peak, before their bytes
    "matmul_bytes": 2.054484,  # each operand byte moves about twice (tiles re-read): small GEMMs lose to it
    "attention": 1.80181,  # attention at 0.56 of the bf16 peak (SDPA, head width 128)
    "elementwise": 1.0,  # held (see above)
    "optimizer": 68.467324,  # bytes per trainable parameter per step (AdamW, casts, fp32 gradients)
    "host": 0.825,  # the sweep's host ran at 0.825 of HOST_SECONDS (the host call's; hosts differ by call)
}
# Kernels one step launches (torch.profiler, CUDA kernels), fixed + per decoder layer, by method and
# checkpointing: docs/gpu-validation/2026-12-03-h200-host, the 1024-wide runs at 2, 8 and 24 layers (exactly
# linear in the layers; the 2048-wide GQA layers launch 5 % more). A GPT block and a frozen base without
# adapters are counted as the Llama layer with the same method (an assumption; their runs are GPU-bound).
HOST_KERNELS: dict[tuple[str, bool], tuple[float, float]] = {
    ("full", False): (68.8, 145.6),
    ("full", True): (68.8, 192.6),
    ("lora", False): (29.3, 236.5),
    ("lora", True): (61.3, 328.5),
}
# The host's seconds: per kernel launched, per checkpointed layer (the recompute's hooks and saved-tensor
# bookkeeping in Python) and per layer with peft's seven adapters (their Python wrappers): least squares on
# relative error over the 28 host-time readings of docs/gpu-validation/2026-12-03-h200-host
# (`bench.fit_sweep.host_seconds()`); this lender's sandboxed host (a faster host runs short steps faster).
HOST_SECONDS: dict[str, float] = {"kernel": 3.119e-5, "checkpoint_layer": 3.051e-3, "peft_layer": 1.817e-3}
# The rate the step's memory-bound parts (GEMM operands, elementwise, optimizer, adapters) see on a GPU whose
# runs measured it, on the scale the constants above were fitted on (the H200's datasheet 4.8 TB/s). The
# H100 SXM's 54 runs of docs/gpu-validation/2026-12-07-h100 (issue #69), never fitted, read 1.13x faster than
# its datasheet 3.35 TB/s forecast them (median; 39 of 54 within 15 %); 4.05 puts them at 1.00 (fitted; each
# width family left out, 4.05-4.1). A plain HBM copy there runs at 3.03 TB/s, 0.70 of the H200's 4.3, but
# the step's memory-bound kernels at 0.84 of the H200's: part of their traffic stays in the L2 (50 MB on the
# H100, 60 on the H200; the same 132 SMs and clocks). Other GPUs: their datasheet figure, not measured.
STEP_BANDWIDTH_TBPS: dict[str, float] = {"H100_SXM": 4.05}
ATTENTION_BACKWARD = 2.5
ELEMENT_BYTES = {"hidden": 761.0, "kv": 304.0, "ffn": 82.0, "vocab": 57.0}
ELEMENT_NO_RECOMPUTE = 0.87
# The byte weights above are Hugging Face Llama's unfused kernels (fp32 RMSNorm, rotary, SwiGLU). The GPT
# job of train/gpt.py (LayerNorm, GELU) moves 0.32 of them: fitted to its two single-GPU H200 runs
# (docs/journal/2026-11-30-gpu.md, "The transformer on H200": gpt-350m 145,464 and gpt-124m 314,805
# tokens/s; 0.25 and 0.40 each), so those two are fitted, not held out.
ELEMENT_SCALE = {"llama": 1.0, "gpt": 0.32}
ADAPTER_BYTES = {True: 61.0, False: 40.0}  # keyed by activation_checkpointing (H200)
ADAPTED_PROJECTIONS_EXTRA = 7
OPERAND_BYTES = 2  # bf16 operands (fp8 halves the inputs; counted as bf16: errs slow)


class StepParts(NamedTuple):
    """Seconds of one micro-batch step on one GPU, by part (recompute is inside the others, reported)."""

    matmul: float
    attention: float
    elementwise: float
    optimizer: float
    adapters: float
    latency: float
    recompute: float
    communication: float

    @property
    def total(self) -> float:
        return (
            self.matmul
            + self.attention
            + self.elementwise
            + self.optimizer
            + self.adapters
            + self.latency
            + self.communication
        )


def _passes(w: Workload, per_layer: bool) -> int:
    """How often a GEMM runs in a step: forward, input gradient, weight gradient (full), recompute."""
    weight_gradient = 1 if w.method == "full" else 0
    recompute = 1 if (per_layer and w.activation_checkpointing) else 0
    return 2 + weight_gradient + recompute


def features(w: Workload, gpu: Hardware, gpus: int = 1) -> dict[str, float]:
    """Each fitted part's seconds per step with its constant at 1: what the constants multiply."""
    peak = gpu.peak_tflops[w.precision] * 1e12
    bandwidth = step_bandwidth(gpu)
    flops = operands = 0.0
    for g in gemms(w):
        times = _passes(w, g.per_layer) * (w.layers if g.per_layer else 1)
        flops += times * 2.0 * g.m * g.n * g.k
        operands += times * OPERAND_BYTES * (g.m * g.k + g.k * g.n + g.m * g.n)
    tokens = w.sequence_length * w.micro_batch_per_gpu
    ckpt = w.activation_checkpointing
    forward = 2.0 * w.sequence_length * w.hidden_size * tokens * w.layers
    attention = forward * (1 + int(ckpt) + ATTENTION_BACKWARD)
    per_layer = (
        ELEMENT_BYTES["hidden"] * w.hidden_size
        + ELEMENT_BYTES["kv"] * kv_width(w)
        + ELEMENT_BYTES["ffn"] * ffn_width(w)
    ) * (1.0 if ckpt else ELEMENT_NO_RECOMPUTE)
    elementwise = tokens * (w.layers * per_layer + ELEMENT_BYTES["vocab"] * w.vocab_size)
    elementwise *= ELEMENT_SCALE[w.block]
    return {
        "matmul_flops": flops / peak,
        "matmul_bytes": operands / bandwidth,
        "attention": attention / (gpu.peak_tflops["bf16"] * 1e12),
        "elementwise": elementwise / bandwidth,
        "optimizer": trainable_per_gpu(w, gpus) / bandwidth,
        "host": host_seconds(w),
    }


def step_bandwidth(gpu: Hardware) -> float:
    """Bytes per second the step's memory-bound parts see on `gpu` (STEP_BANDWIDTH_TBPS, else its datasheet
    figure)."""
    return STEP_BANDWIDTH_TBPS.get(gpu.name, gpu.memory_bandwidth_tbps) * 1e12


def kernels(w: Workload) -> float:
    """CUDA kernels one micro-batch step launches (HOST_KERNELS)."""
    fixed, per_layer = HOST_KERNELS[(w.method, w.activation_checkpointing)]
    return fixed + per_layer * w.layers


def host_seconds(w: Workload) -> float:
    """The host's time for one step on the host the kernels were counted on (HOST_SECONDS)."""
    peft = w.method == "lora" and w.trainable_fraction > 0
    return (
        HOST_SECONDS["kernel"] * kernels(w)
        + HOST_SECONDS["checkpoint_layer"] * w.layers * int(w.activation_checkpointing)
        + HOST_SECONDS["peft_layer"] * w.layers * int(peft)
    )


def trainable_per_gpu(w: Workload, gpus: int = 1) -> float:
    """Parameters whose optimizer step this GPU runs (all of them for one GPU or DDP)."""
    trainable = w.parameters * w.trainable_fraction
    return trainable / gpus if w.sharding in ("zero1", "zero2", "zero3") else trainable


def adapted_width(w: Workload) -> float:
    """Σ(in + out) of a Llama block's seven projections: P/h + 7h with P = (Ψ - 2·V·h) / L."""
    h = w.hidden_size
    per_block = max(0.0, w.parameters - 2.0 * w.vocab_size * h) / w.layers
    return per_block / h + ADAPTED_PROJECTIONS_EXTRA * h


def adapter_seconds(w: Workload, gpu: Hardware) -> float:
    """LoRA's memory-bound adapter passes for one micro-batch step; 0 for a full fine-tune."""
    if w.method != "lora" or w.trainable_fraction == 0:  # a full fine-tune, or frozen layers alone
        return 0.0
    tokens = w.sequence_length * w.micro_batch_per_gpu
    width = w.layers * adapted_width(w)
    return ADAPTER_BYTES[w.activation_checkpointing] * tokens * width / step_bandwidth(gpu)


def _compute_parts(w: Workload, gpu: Hardware, c: dict[str, float], gpus: int) -> dict[str, float]:
    f = features(w, gpu, gpus)
    return {
        "matmul": c["matmul_flops"] * f["matmul_flops"] + c["matmul_bytes"] * f["matmul_bytes"],
        "attention": c["attention"] * f["attention"],
        "elementwise": c["elementwise"] * f["elementwise"],
        "optimizer": c["optimizer"] * f["optimizer"],
        "adapters": adapter_seconds(w, gpu),
    }


def step_parts(
    w: Workload,
    gpu: Hardware,
    sharding_share: float = 1.0,
    constants: dict[str, float] | None = None,
    gpus: int = 1,
) -> StepParts:
    """The step's parts; `sharding_share` (≤ 1, forecast.compute) is the share zero3's collectives leave,
    `gpus` the job's GPUs (zero1-3 divide the optimizer step among them)."""
    c = STEP_CONSTANTS if constants is None else constants
    parts = _compute_parts(w, gpu, c, gpus)
    busy = sum(parts.values())
    # The host launches kernels ahead of the GPU: its time shows only where it is the longer of the two,
    # and the optimizer step, launched last, runs after it.
    host = c["host"] * host_seconds(w) + parts["optimizer"]
    recompute = 0.0
    if w.activation_checkpointing:
        without = w._replace(activation_checkpointing=False)
        recompute = busy - sum(_compute_parts(without, gpu, c, gpus).values())
    return StepParts(
        **parts,
        latency=max(0.0, host - busy),
        recompute=recompute,
        communication=busy * (1.0 / sharding_share - 1.0),
    )


def assumed(w: Workload) -> tuple[str, ...]:
    """What the step model assumed for this workload rather than measured or was given, as words: the
    shapes the workload left out (forecast.shapes), and fp8's matmuls, which no run has measured."""
    notes = list(shapes.assumed(w))
    if w.precision == "fp8":
        share = 1.0 / STEP_CONSTANTS["matmul_flops"]
        notes.append(
            f"fp8 matmuls at the GPU's datasheet FP8 peak x {share:.2f}, the share fitted to bf16 runs "
            "(no fp8 run measured; operands counted as bf16 bytes)"
        )
    return tuple(notes)
