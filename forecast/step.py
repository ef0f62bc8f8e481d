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
                 weights are the frozen-base step differences of issue #32, docs/FORECAST.md)
    optimizer    trainable parameters (÷ N under zero1-3) x C_opt bytes at HBM bandwidth: AdamW's reads and
                 writes, the weights' casts to bf16, the fp32 gradients; once per micro-batch step
    adapters     LoRA only: 61 (checkpointed) or 40 bytes per token per element of adapted width (issue #32)
    latency      C_lat seconds per layer per pass (forward, backward, recompute), C_lora more with
                 peft's adapters: kernel launches and the host's Python. The host runs ahead of the GPU,
                 so this shows only where it is longer than the rest (a short, narrow step)
    recompute    (reported) the part of the above checkpointing adds
    communication zero3's exposed per-layer collectives (forecast.compute's share, unchanged)

The constants C (STEP_CONSTANTS) are fitted by least squares on relative error to the 40 H200 runs of
docs/gpu-validation/2026-12-03-h200-sweep (bench/fit_sweep.py refits them and reports the error on each
shape left out); each names its runs there.
"""

from __future__ import annotations

from typing import NamedTuple

from forecast.model import Hardware, Workload
from forecast.shapes import ffn_width, gemms, kv_width

# Fitted by `python -m bench.fit_sweep '{"elementwise": 1.0}'` to all 66 runs of
# docs/gpu-validation/2026-12-03-h200-sweep (sweep.json: call 1, runs 0-39; sweep2.json: call 2, runs 0-25;
# one H200, widths 1024-8192), least squares on relative step time; the elementwise scale is held at 1 (its
# per-element bytes were measured as step differences in issue #32, and fitted freely it trades against the
# GEMM bytes, which carry the same widths). The latencies are a grid search: the host-bound runs of both
# calls (b = 1, s = 1024, and the 1024-wide shapes) set them. docs/FORECAST.md "Step time" has the
# error on the shapes left out.
STEP_CONSTANTS: dict[str, float] = {
    "matmul_flops": 1.055,  # 1 / U_mm: the GEMMs' FLOPs at 0.95 of peak, before their bytes
    "matmul_bytes": 3.64,  # each operand byte moves 3.6 times (tiles re-read): small GEMMs lose to it
    "attention": 1.548,  # attention at 0.65 of the bf16 peak (SDPA, head width 128)
    "elementwise": 1.0,  # held (see above)
    "optimizer": 62.3,  # bytes per trainable parameter per step (AdamW, casts, fp32 gradients)
    "latency": 0.00155,  # host seconds per layer per pass (Hugging Face Llama layer, this host)
    "latency_lora": 0.0012,  # more per layer per pass with peft's seven adapters
}
ATTENTION_BACKWARD = 2.5
ELEMENT_BYTES = {"hidden": 761.0, "kv": 304.0, "ffn": 82.0, "vocab": 57.0}
ELEMENT_NO_RECOMPUTE = 0.87
# The byte weights above are Hugging Face Llama's unfused kernels (fp32 RMSNorm, rotary, SwiGLU). The GPT
# job of train/gpt.py (LayerNorm, GELU) moves 0.32 of them: fitted to its two single-GPU H200 runs (docs/
# GPU-VALIDATION.md, "The transformer on H200": gpt-350m 145,464 and gpt-124m 314,805 tokens/s; 0.25 and 0.40
# each), so those two are fitted, not held out.
ELEMENT_SCALE = {"llama": 1.0, "gpt": 0.32}
ADAPTER_BYTES = {True: 61.0, False: 40.0}  # keyed by activation_checkpointing (issue #32, H200)
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
    bandwidth = gpu.memory_bandwidth_tbps * 1e12
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
        "latency": float(w.layers * (3 + int(ckpt))),
        "latency_lora": float(w.layers * (3 + int(ckpt))) if w.method == "lora" else 0.0,
    }


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
    return ADAPTER_BYTES[w.activation_checkpointing] * tokens * width / (gpu.memory_bandwidth_tbps * 1e12)


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
    # The host launches kernels ahead of the GPU: its time shows only where it is the longer of the two.
    f = features(w, gpu, gpus)
    host = c["latency"] * f["latency"] + c["latency_lora"] * f["latency_lora"]
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
