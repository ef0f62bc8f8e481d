"""The forecast's input model and its result records: plain frozen data, no Pulumi, no I/O.

Records are NamedTuples, not dataclasses: every preview imports this module, and a frozen dataclass costs
about 20 times as much to define (each generates and compiles six methods). Change one with `._replace(...)`.

A caller (the stack, `scripts/forecast`, a benchmark comparing with a measured run) builds a `ForecastInput`
and calls `forecast.forecast(ForecastInput) -> Forecast`. Units are written on every field: bytes are
counted in decimal GB (1e9), as GPU datasheets state memory; compute in FLOPs and TFLOPS (1e12 FLOP/s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

Method = Literal["full", "lora"]
Precision = Literal["bf16", "fp8"]
Optimizer = Literal["adamw", "adamw_8bit", "sgd"]
Sharding = Literal["ddp", "zero1", "zero2", "zero3"]
Block = Literal[
    "llama", "gpt"
]  # llama: RMSNorm + SwiGLU (the stacks' shapes); gpt: LayerNorm + GELU MLP of 4h
Verdict = Literal["fits", "may not fit", "does not fit"]

# Sharding modes from least to most sharded (the order fixes are tried in).
SHARDING_ORDER: tuple[Sharding, ...] = ("ddp", "zero1", "zero2", "zero3")


class Hardware(NamedTuple):
    """One GPU type: what memory it has and how fast its tensor cores are (from the GPU table)."""

    name: str  # for messages, e.g. "H100_SXM"
    memory_gb: float  # per GPU, decimal GB as the datasheet states it
    peak_tflops: Mapping[
        str, float
    ]  # precision ("bf16", "fp8") -> dense peak TFLOPS per GPU; absent: unsupported
    memory_bandwidth_tbps: float = (
        3.35  # HBM TB/s per GPU (datasheet): what LoRA's adapter passes are bound by
    )


class Workload(NamedTuple):
    """The training run: the model, its data, and how it is trained."""

    parameters: float  # Ψ, total parameters of the model (the frozen base model for LoRA)
    tokens: float  # T, training tokens one job processes (each pod of a pool runs its own job)
    method: Method  # full fine-tune / pre-training, or LoRA adapters on a frozen base
    trainable_fraction: float  # trainable parameters / Ψ: 1.0 for full, the adapters' share for LoRA
    precision: Precision  # tensor-core precision of the matrix multiplies (weights kept in bf16 either way)
    optimizer: Optimizer
    sharding: Sharding  # ddp: replicated; zero1/zero2/zero3: ZeRO stages (zero3 = FSDP full shard)
    layers: int  # L, transformer blocks
    hidden_size: int  # h
    attention_heads: int  # a
    vocab_size: int  # V, sets the size of the logits
    sequence_length: int  # s, tokens per sample
    micro_batch_per_gpu: int  # b, samples per GPU per forward pass
    activation_checkpointing: bool  # keep only each block's input and recompute the rest in backward
    flash_attention: bool  # attention that never stores the s x s score matrix (FlashAttention, SDPA)
    mfu: float | None  # model-FLOPs utilisation assumed; None: the documented default (forecast.compute)
    overhead: float  # wall-clock fraction added for communication, checkpoint saves and restarts
    block: Block = "llama"  # the transformer block, for its activations (forecast.memory)
    kv_heads: int | None = None  # key-value heads (grouped-query attention); None: assumed (forecast.shapes)
    ffn_hidden_size: int | None = None  # the MLP's inner width; None: what the parameters leave (same)


class Deployment(NamedTuple):
    """Where the workload runs and what that costs."""

    gpu: Hardware
    gpus_per_job: int  # data-parallel degree N: GPUs one job shards or replicates over
    jobs: int  # independent jobs running at once (a pool of pods runs one job a pod)
    compute_usd_per_hour: float  # every GPU of the stack, on-demand
    spot_compute_usd_per_hour: float | None  # every GPU at the spot bid; None when the stack is on-demand
    storage_usd_per_hour: float  # volumes, billed hourly from their monthly price
    max_run_hours: float  # the watchdog stops a run after this long; it resumes from its checkpoint
    burn_in_hours: float = 0.0  # training.burn_in_min: new nodes' stress test before training


class ForecastInput(NamedTuple):
    workload: Workload
    deployment: Deployment


class MemoryForecast(NamedTuple):
    """Per GPU, decimal GB."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    gather_buffers: float  # zero3 only: unsharded weights of the layer computing and the one prefetched
    allowance: float  # CUDA context, NCCL and library workspaces, allocator fragmentation
    total: float  # the central estimate
    gpu_memory: float
    headroom: float  # gpu_memory - total; negative when the central estimate does not fit
    total_low: float  # the uncertainty band's ends (forecast.memory, docs/FORECAST.md "Uncertainty band")
    total_high: float

    @property
    def fits(self) -> bool:
        """The band's upper end fits: no measured run peaked above it."""
        return self.total_high <= self.gpu_memory

    @property
    def verdict(self) -> Verdict:
        if self.fits:
            return "fits"
        return "may not fit" if self.total_low <= self.gpu_memory else "does not fit"


class ComputeForecast(NamedTuple):
    """One job's compute and its wall-clock time on this deployment."""

    model_flops: float  # FLOPs the model needs (6·N·T for full training), what MFU is measured against
    executed_flops: float  # model FLOPs plus the forward pass recomputed under activation checkpointing
    mfu: float  # the utilisation used (given, or the default for the precision and checkpointing)
    effective_tflops_per_gpu: float  # peak x mfu
    tokens_per_gpu_second: float  # the throughput this implies, to compare with a measured run
    gpu_hours: float  # model_flops / effective rate: GPU-hours of one job at that rate, no overhead
    ideal_hours: float  # gpu_hours spread over the job's GPUs
    hours: float  # ideal_hours x (1 + overhead) + the burn-in of new nodes: the forecast wall clock
    segments: int  # runs of at most max_run_hours the job needs
    restarts: int  # segments - 1: times the watchdog stops the run and someone resumes it


class CostForecast(NamedTuple):
    """The whole stack (every job) for the forecast wall clock, USD."""

    usd_per_hour: float  # compute on-demand + storage
    run_usd: float  # hours x usd_per_hour
    spot_usd_per_hour: float | None  # compute at the spot bid + storage; None when on-demand
    spot_run_usd: float | None


class Forecast(NamedTuple):
    input: ForecastInput
    memory: MemoryForecast
    compute: ComputeForecast
    cost: CostForecast
    fixes: tuple[str, ...]  # when memory does not fit: changes that make it fit, cheapest first
    # what the forecast assumed rather than measured or was given (forecast.step.assumed), as words: the
    # output key `assumed` (a list of strings)
    assumed: tuple[str, ...] = ()

    def to_output(self) -> dict[str, Any]:
        """A JSON-friendly summary, the stack output `forecast` that the policy pack and the report read."""
        m, c, k, d = self.memory, self.compute, self.cost, self.input.deployment
        return {
            "gpu": d.gpu.name,
            "gpus_per_job": d.gpus_per_job,
            "jobs": d.jobs,
            "memory_gb_per_gpu": {
                "weights": _r(m.weights),
                "gradients": _r(m.gradients),
                "optimizer": _r(m.optimizer),
                "activations": _r(m.activations),
                "gather_buffers": _r(m.gather_buffers),
                "allowance": _r(m.allowance),
                "total": _r(m.total),
                "total_low": _r(m.total_low),
                "total_high": _r(m.total_high),
                "gpu": _r(m.gpu_memory),
                "headroom": _r(m.headroom),
            },
            "fits": m.fits,
            "verdict": m.verdict,
            "fixes": list(self.fixes),
            "flops": float(f"{c.model_flops:.4g}"),
            "mfu": round(c.mfu, 4),
            "hours": _r(c.hours),
            "max_run_hours": d.max_run_hours,
            "restarts": c.restarts,
            "usd_per_hour": round(k.usd_per_hour, 2),
            "run_cost_usd": round(k.run_usd, 2),
            "spot_run_cost_usd": None if k.spot_run_usd is None else round(k.spot_run_usd, 2),
            "assumed": list(self.assumed),
        }


def _r(value: float) -> float:
    return round(value, 2)
