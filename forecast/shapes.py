"""A Llama (or GPT) block's shapes from the workload: key-value width, FFN width, and every GEMM of a step.

The workload may leave `kv_heads` and `ffn_hidden_size` out. Then they are assumed from the parameter count's
usual shapes (the forecast says so, `assumed()`): grouped-query attention with 8 key-value heads when the
heads are a multiple of 8 (Llama 3, Mistral, Qwen 2 and later; Llama-2-7B and -13B are the multi-head
exceptions, and a user of one sets `kv_heads`), else one key-value head per head; the FFN width is what the
block's parameters leave after attention: P = (Ψ - 2·V·h)/L = 2h² + 2·h·kv + 3·h·F for the Llama block
(SwiGLU: gate, up and down), rounded to a multiple of 256. A GPT block is multi-head with an FFN of 4h.
"""

from __future__ import annotations

from typing import NamedTuple

from forecast.model import Workload
from stackconfig.model import usual_kv_heads

FFN_MULTIPLE = 256


class Gemm(NamedTuple):
    """One matrix multiply of the forward pass: (m x k) @ (k x n), m the tokens of a micro-batch."""

    name: str
    m: int
    n: int
    k: int
    per_layer: bool  # True for a decoder layer's projections (times L; recomputed under checkpointing)


def kv_heads(w: Workload) -> int:
    if w.kv_heads is not None:
        return w.kv_heads
    a = w.attention_heads
    if w.block == "gpt":
        return a  # GPT-2's blocks are multi-head
    return usual_kv_heads(a)  # the one rule, which the stack config's shape check assumes too


def kv_width(w: Workload) -> int:
    """Key (or value) projection's output width: key-value heads x head width."""
    return kv_heads(w) * w.hidden_size // w.attention_heads


def _mlp_matrices(w: Workload) -> int:
    return 3 if w.block == "llama" else 2


def block_parameters(w: Workload) -> float:
    """P, parameters of one decoder block (projections only; norms are a rounding error), from Ψ."""
    return max(0.0, w.parameters - 2.0 * w.vocab_size * w.hidden_size) / w.layers


def ffn_width(w: Workload) -> int:
    if w.ffn_hidden_size is not None:
        return w.ffn_hidden_size
    h = w.hidden_size
    if w.block == "gpt":
        return 4 * h  # the GPT block's MLP is 4h by definition (and GPT-2 ties its embeddings)
    attention = 2.0 * h * h + 2.0 * h * kv_width(w)
    width = (block_parameters(w) - attention) / (_mlp_matrices(w) * h)
    # published widths are multiples of 256 (Llama's 11008, 13824, 14336, 28672); the norms' parameters
    # would otherwise leave it a unit or two over
    return max(1, FFN_MULTIPLE * round(width / FFN_MULTIPLE) if width >= FFN_MULTIPLE else round(width))


def assumed(w: Workload) -> tuple[str, ...]:
    """The shapes the forecast assumed because the workload did not give them, as words."""
    notes = []
    if w.kv_heads is None:
        notes.append(f"kv_heads {kv_heads(w)} (usual for {w.attention_heads} heads; set kv_heads)")
    if w.ffn_hidden_size is None:
        notes.append(f"ffn_hidden_size {ffn_width(w)} (what the parameters leave; set ffn_hidden_size)")
    return tuple(notes)


def gemms(w: Workload) -> tuple[Gemm, ...]:
    """The forward pass's matrix multiplies of one micro-batch: a layer's seven (or six) and the LM head."""
    t, h, kv, f = w.sequence_length * w.micro_batch_per_gpu, w.hidden_size, kv_width(w), ffn_width(w)
    layer = [
        Gemm("q", t, h, h, True),
        Gemm("k", t, kv, h, True),
        Gemm("v", t, kv, h, True),
        Gemm("o", t, h, h, True),
        Gemm("up", t, f, h, True),
        Gemm("down", t, h, f, True),
    ]
    if w.block == "llama":
        layer.append(Gemm("gate", t, f, h, True))
    return (*layer, Gemm("head", t, w.vocab_size, h, False))
