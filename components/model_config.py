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

if TYPE_CHECKING:
    from components.config import StackConfig

Problem = tuple[str, str]  # (key path without the namespace, message ending with the fix)


class ModelConfig(BaseModel):
    """What the forecast needs to know about the model and how it is trained."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no NaN, inf, 1e309

    parameters: float  # total parameters, e.g. 7.0e9
    tokens: float  # training tokens of one job
    method: Literal["full", "lora"] = "full"
    trainable_fraction: float | None = None  # LoRA only: trainable / total parameters, e.g. 0.005
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
    mfu: float | None = None  # model-FLOPs utilisation; None: the measured default (forecast.compute)
    overhead: float = 0.3  # wall clock added for communication, checkpoint saves and restarts

    @field_validator(
        "parameters",
        "tokens",
        "layers",
        "hidden_size",
        "sequence_length",
        "micro_batch_per_gpu",
        "vocab_size",
    )
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError(
                f"must be more than 0, got {v:g}; give the size (e.g. 7.0e9 parameters, 4096 tokens)"
            )
        return v

    @field_validator("attention_heads")
    @classmethod
    def _heads(cls, v: int, info: ValidationInfo) -> int:
        if v <= 0:
            raise ValueError(f"must be more than 0, got {v}; give the model's attention heads (e.g. 32)")
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
            raise ValueError(f"must be between 0 and 1, got {v:g}; LoRA trains 0.001-0.01 of the parameters")
        return v

    @field_validator("mfu")
    @classmethod
    def _mfu(cls, v: float | None) -> float | None:
        if v is not None and not 0 < v <= 1:
            raise ValueError(
                f"must be more than 0 and at most 1, got {v:g}; 0.3-0.5 is typical, or leave it out"
            )
        return v

    @field_validator("overhead")
    @classmethod
    def _overhead(cls, v: float) -> float:
        if not 0 <= v <= 5:
            raise ValueError(f"must be 0-5 (a fraction of the ideal time), got {v:g}; 0.3 is the default")
        return v


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
