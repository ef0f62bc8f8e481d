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

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from stackconfig.numbers import Number, in_range, shown

Problem = tuple[str, str]  # (key path without the namespace, message ending with the fix)

# Sizes as people write them: 8B, 20M, 1.5T, 500k (decimal: B = 1e9), or a number in any notation (2e7,
# 2.0e10, 20000000). PyYAML reads an exponent without a sign or a dot (2e7) as text, so text is parsed here.
_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*$")
SIZE_FORMS = "write a number (8.03e9, 2e7, 20000000) or one with a suffix (8B, 20M, 1.5T, 500k)"


def parse_size(value: object) -> object:
    """`8B` -> 8e9, `20M` -> 2e7, `"2e7"` -> 2e7; anything else is returned for pydantic to judge."""
    if isinstance(value, str):
        m = _SIZE_RE.match(value.replace("_", "").replace(",", ""))
        if m is None:
            raise ValueError(f"{value!r} is not a size; {SIZE_FORMS}")
        return float(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1.0)
    return value


def shape_parameters(layers: int, hidden_size: int, vocab_size: int) -> float:
    """Parameters the shapes imply: 12·h² a transformer block (Kaplan et al. 2020, §2.1) plus the input and
    output embeddings, 2·V·h. Llama-3-8B's shapes give 7.5e9 of its 8.03e9 (its grouped-query attention
    and wider MLP differ from the 12·h² block): a rough check, hence the 25 % band."""
    return 12.0 * layers * hidden_size**2 + 2.0 * vocab_size * hidden_size


PARAMETER_BAND = 0.25  # a count further than this from the shapes' is worth a warning

# Grouped-query attention's usual key-value heads when `kv_heads` is not given (forecast/shapes.py says why).
USUAL_KV_HEADS = 8
# How far `parameters` may be from the count the full shapes make before the stack is refused: the count
# counts every matrix of a Llama block and the embeddings, once tied or twice untied, so what it leaves out
# (norms, biases: under 1 % for Llama 3, Mistral, Qwen 2) and a count written round (8B for 8.03e9, 7B for
# Llama 2's 6.74e9: 4 %) stay well inside 10 %; a shape copied wrong is far outside it (ffn_hidden_size 1 on
# Llama-3-8B makes 2.4e9, 70 % apart). Inside the band the forecast's hours move by at most about as much.
SHAPE_TOLERANCE = 0.10


def usual_kv_heads(heads: int) -> int:
    """8 key-value heads when the heads are a multiple of 8 above it, else one per head (multi-head)."""
    return USUAL_KV_HEADS if heads % USUAL_KV_HEADS == 0 and heads > USUAL_KV_HEADS else heads


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
    # grouped-query attention's key-value heads (config.json num_key_value_heads); None: the forecast assumes
    # the usual shape (8 when the heads are a multiple of 8 above it, else one per head) and says so
    kv_heads: int | None = None
    # the MLP's inner width (config.json intermediate_size); None: what the parameters leave, said so
    ffn_hidden_size: int | None = None
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

    @field_validator("parameters", "tokens", mode="before")
    @classmethod
    def _size(cls, v: object) -> object:
        return parse_size(v)

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

    @field_validator("kv_heads")
    @classmethod
    def _kv_heads(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is None:
            return v
        heads = info.data.get("attention_heads")
        if v < 1 or (isinstance(heads, int) and heads % v):
            raise ValueError(
                f"{v} key-value heads do not divide attention_heads {heads} (each key-value head serves a "
                "group of query heads); copy num_key_value_heads from the model's config.json"
            )
        return v

    @field_validator("ffn_hidden_size")
    @classmethod
    def _ffn(cls, v: int | None) -> int | None:
        return v if v is None else int(in_range(v, 1, 1_048_576, "give the MLP's inner width, e.g. 14336"))

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


def _attention(m: ModelConfig) -> float:
    """A Llama block's attention projections: q and o (h x h each), k and v (h x key-value width each)."""
    kv_width = (m.kv_heads or usual_kv_heads(m.attention_heads)) * m.hidden_size // m.attention_heads
    return 2.0 * m.hidden_size**2 + 2.0 * m.hidden_size * kv_width


def shape_problem(m: ModelConfig) -> Problem | None:
    """The shapes and `parameters` of one model must agree within SHAPE_TOLERANCE: the forecast's memory
    counts `parameters`, its hours the shapes' matrix multiplies, so a shape copied wrong moved the run's cost
    without a word (ffn_hidden_size 1 halved prod's). With `ffn_hidden_size` given the shapes make a whole
    count, L·(attention + 3·h·ffn) + V·h or 2·V·h (embeddings tied or not); without it the forecast fills the
    MLP from `parameters`, which must then at least hold the attention and one embedding."""
    h, layers, vocab = m.hidden_size, m.layers, m.vocab_size
    kv = m.kv_heads or usual_kv_heads(m.attention_heads)
    shown_shapes = (
        f"layers {layers}, hidden_size {h}, attention_heads {m.attention_heads}, kv_heads {kv}"
        f"{'' if m.kv_heads else ' (assumed)'}, vocab_size {vocab}"
    )
    if m.ffn_hidden_size is None:
        least = layers * _attention(m) + vocab * h
        if m.parameters >= (1 - SHAPE_TOLERANCE) * least:
            return None
        return (
            "training.model.parameters",
            f"is {m.parameters:.3g}, but the shapes ({shown_shapes}) need at least {least:.3g} for the "
            "attention and the embeddings alone, before any MLP: one of them is wrong; copy the shapes from "
            "the model's config.json, or correct parameters",
        )
    blocks = layers * (_attention(m) + 3.0 * h * m.ffn_hidden_size)
    counts = (blocks + 2.0 * vocab * h, blocks + vocab * h)  # embeddings untied (Llama 3 8B), tied (3.2 1B)
    nearest = min(counts, key=lambda c: abs(m.parameters / c - 1))
    if abs(m.parameters / nearest - 1) <= SHAPE_TOLERANCE:
        return None
    return (
        "training.model.ffn_hidden_size",
        f"{m.ffn_hidden_size} with {shown_shapes} makes {counts[0]:.3g} parameters ({counts[1]:.3g} with "
        f"tied embeddings), but parameters is {m.parameters:.3g}, {m.parameters / nearest:.2f} x that: "
        f"beyond the {SHAPE_TOLERANCE:.0%} the forecast allows (its memory follows parameters, its hours "
        "the shapes); "
        "copy ffn_hidden_size (intermediate_size), kv_heads (num_key_value_heads) and the rest from the "
        "model's config.json, or correct parameters (docs/FORECAST.md)",
    )


def parameter_notice(model: ModelConfig) -> str | None:
    """A warning when `parameters` disagrees with what the shapes imply by more than PARAMETER_BAND (the
    memory forecast counts `parameters`, the activations the shapes: one of them is wrong); None otherwise,
    and None when `ffn_hidden_size` is given: the whole count of `shape_problem` is then checked instead."""
    if model.ffn_hidden_size is not None:
        return None
    implied = shape_parameters(model.layers, model.hidden_size, model.vocab_size)
    if abs(model.parameters - implied) <= PARAMETER_BAND * implied:
        return None
    return (
        f"trainstack:training.model.parameters is {model.parameters:.3g}, but the shapes (layers "
        f"{model.layers} x hidden_size {model.hidden_size}, vocab_size {model.vocab_size}) imply about "
        f"{implied:.3g} (12·layers·hidden² + 2·vocab·hidden), {abs(model.parameters / implied - 1):.0%} "
        "apart: the forecast's weights and optimizer follow `parameters`, its activations the shapes; set "
        "the shapes of the model you train (its config.json), or its parameter count"
    )
