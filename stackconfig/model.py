"""`trainstack:training.model`: the model a stack trains, for the memory, time and cost forecast (optional).

    trainstack:training:
      model:
        parameters: 7.0e9            # Ψ, total parameters (the frozen base for LoRA)
        tokens: 5.0e8                # training tokens of one job (each pod of a pool runs its own job)
        method: full                 # full | lora (then trainable_fraction, e.g. 0.005)
        precision: bf16              # bf16 | fp8 (fp8 needs FP8 tensor cores: facts/gpus.py)
        optimizer: adamw             # adamw | adamw_8bit | sgd
        sharding: zero3              # ddp | zero1 | zero2 | zero3 (= FSDP full shard)
        layers: 32
        hidden_size: 4096
        attention_heads: 32
        sequence_length: 4096
        micro_batch_per_gpu: 1
        activation_checkpointing: true

Every default is written once, on the fields below; docs/FORECAST.md explains each figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from facts.gpus import GPUS, GpuSpec
from stackconfig.numbers import Number, in_range, shown

if TYPE_CHECKING:
    from stackconfig.config import StackConfig

Problem = tuple[str, str]  # (key path without the namespace, message ending with the fix)


# The best model-FLOPs utilisation published for a large training run: MegaScale, 55.2 % for a 175B model
# on 12,288 GPUs (Jiang et al. 2024, https://arxiv.org/abs/2402.15627, Table 2); PaLM reported 46.2 %.
# An `mfu` above it is an assumption no published run has reached: it needs mfu_beyond_published: true.
BEST_PUBLISHED_MFU = 0.552

# Each bounded field: (lowest, highest, what to write). The bounds are far outside any real model (the
# largest published dense models have ~1e12 parameters) but keep every product of the forecast finite.
_RANGES: dict[str, tuple[float, float, str]] = {
    "parameters": (1, 1e13, "give the total parameters, e.g. 7.0e9"),
    "tokens": (1, 1e15, "give the training tokens of one job, e.g. 5.0e8"),
    "layers": (1, 1000, "give the model's transformer layers, e.g. 32"),
    "hidden_size": (1, 131_072, "give the model's hidden size, e.g. 4096"),
    "attention_heads": (1, 1024, "give the model's attention heads, e.g. 32"),
    "vocab_size": (1, 10_000_000, "give the tokenizer's vocabulary, e.g. 128256"),
    "sequence_length": (1, 4_194_304, "give the training sequence length, e.g. 4096"),
    "micro_batch_per_gpu": (1, 65_536, "give the micro-batch per GPU, e.g. 1"),
}


class ModelConfig(BaseModel):
    """What the forecast needs to know about the model and how it is trained."""

    # no NaN, inf, 1e309; booleans are never numbers (strict), numeric text is read (Number)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    parameters: Number  # total parameters, e.g. 7.0e9
    tokens: Number  # training tokens of one job
    method: Literal["full", "lora"] = "full"
    trainable_fraction: Number | None = None  # LoRA only: trainable / total parameters, e.g. 0.005
    precision: Literal["bf16", "fp8"] = "bf16"
    optimizer: Literal["adamw", "adamw_8bit", "sgd"] = "adamw"
    sharding: Literal["ddp", "zero1", "zero2", "zero3"] = "ddp"
    layers: int
    hidden_size: int
    attention_heads: int
    vocab_size: int = 32000  # Llama 2's; sets the size of the logits
    sequence_length: int
    micro_batch_per_gpu: int = 1
    activation_checkpointing: bool = False
    flash_attention: bool = (
        True  # PyTorch's scaled_dot_product_attention and FlashAttention never store s x s
    )
    # true: an `mfu` above BEST_PUBLISHED_MFU is meant (a measured run of your own beat it); before `mfu`,
    # so that mfu's check sees it
    mfu_beyond_published: bool = False
    mfu: Number | None = None  # model-FLOPs utilisation; None: the measured default (forecast.compute)
    overhead: Number = 0.3  # wall clock added for communication, checkpoint saves and restarts

    @field_validator(*_RANGES)
    @classmethod
    def _in_range(cls, v: float, info: ValidationInfo) -> float:
        low, high, fix = _RANGES[str(info.field_name)]
        return in_range(v, low, high, fix)

    @field_validator("attention_heads")
    @classmethod
    def _heads(cls, v: int, info: ValidationInfo) -> int:
        hidden = info.data.get("hidden_size")
        if isinstance(hidden, int) and hidden % v:
            raise ValueError(
                f"{v} heads do not divide hidden_size {hidden} (each head gets hidden_size / heads "
                "dimensions); check the model card: both come from the same config.json"
            )
        return v

    @field_validator("trainable_fraction")
    @classmethod
    def _fraction(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is None:
            return v
        if info.data.get("method") == "full":
            raise ValueError("is for method lora only; remove it, or set method: lora")
        if not 0 < v < 1:
            raise ValueError(
                f"must be between 0 and 1, got {shown(v)}; LoRA trains 0.001-0.01 of the parameters"
            )
        return v

    @field_validator("mfu")
    @classmethod
    def _mfu(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is None:
            return v
        # Below 1 % no run is that slow on purpose; 4.4e-309 made the forecast's hours infinite.
        in_range(v, 0.01, 1, "0.3-0.5 is typical, or leave it out")
        if v > BEST_PUBLISHED_MFU and not info.data.get("mfu_beyond_published"):
            raise ValueError(
                f"{shown(v)} is above the best published {BEST_PUBLISHED_MFU:g} (MegaScale, "
                "arXiv:2402.15627): the forecast would promise a run cheaper than any on record; use a "
                "measured figure, or set mfu_beyond_published: true if your own run measured it"
            )
        return v

    @field_validator("overhead")
    @classmethod
    def _overhead(cls, v: float) -> float:
        return in_range(v, 0, 5, "a fraction of the ideal time; 0.3 is the default")


def model_problems(config: StackConfig, gpus: Mapping[str, GpuSpec] = GPUS) -> list[Problem]:
    """Rules between the model and the rest of the stack: LoRA's fraction, the GPU's precisions (`gpus`:
    the GPU table)."""
    model = config.training.model
    if model is None:
        return []
    out: list[Problem] = []
    if model.method == "lora" and model.trainable_fraction is None:
        out.append(
            (
                "training.model.trainable_fraction",
                "method lora needs the adapters' share of the parameters; set it, e.g. 0.005 for rank-16 "
                "adapters on a 7B model",
            )
        )
    gpu = gpus[config.cluster.gpu_type]
    if gpu.peak_tflops(model.precision) is None:
        out.append(
            (
                "training.model.precision",
                f"{gpu.label} has no {model.precision} tensor cores ({gpu.perf_source}); use precision "
                "bf16, or a GPU type with FP8 (H100)",
            )
        )
    return out
