"""Per-GPU memory against the source article's worked figures and hand-computed cases per sharding mode."""

from __future__ import annotations

import pytest

from forecast import Hardware, forecast
from forecast.memory import activations, memory
from tests.forecast.factories import A100, SEVEN_B, deployment, inp

# A small model whose figures are easy to check by hand: Ψ = 1e9, N = 4, adamw (K = 12).
SMALL = SEVEN_B._replace(
    parameters=1e9,
    layers=8,
    hidden_size=1024,
    attention_heads=16,
    sequence_length=1024,
    micro_batch_per_gpu=2,
    block="gpt",
)
BIG_GPU = Hardware("big", 1000.0, {"bf16": 100.0})

# ZeRO paper, Figure 1: 2Ψ + 2Ψ + KΨ, divided by N for the sharded parts; in GB for Ψ = 1e9, N = 4.
#   ddp 2 + 2 + 12, zero1 2 + 2 + 12/4, zero2 2 + (2 + 12)/4, zero3 (2 + 2 + 12)/4.
# zero3 also holds 2 layers x 12h² x 2 bytes = 48 x 1024² = 50,331,648 bytes of gathered weights.
STATES = [
    ("ddp", 2.0, 2.0, 12.0, 0.0),
    ("zero1", 2.0, 2.0, 3.0, 0.0),
    ("zero2", 2.0, 0.5, 3.0, 0.0),
    ("zero3", 0.5, 0.5, 3.0, 0.050331648),
]


@pytest.mark.parametrize(("sharding", "weights", "grads", "optim", "buffers"), STATES)
def test_model_states_per_sharding_mode(
    sharding: str, weights: float, grads: float, optim: float, buffers: float
) -> None:
    mem = memory(SMALL._replace(sharding=sharding), BIG_GPU, gpus=4)  # type: ignore[arg-type]
    assert (mem.weights, mem.gradients, mem.optimizer) == pytest.approx((weights, grads, optim))
    assert mem.gather_buffers == pytest.approx(buffers)
    # Activations (see the next test): 1.500512256 GB (a full fine-tune, not checkpointed), more than the
    # gradients, so the peak is the end of the forward pass: weights, optimizer, buffers and activations.
    # The allowance: the CUDA context 0.8 GB + 1.2 GB of collective buffers on a job of several GPUs.
    tensors = weights + optim + buffers + max(grads, 1.365245952)
    assert mem.allowance == pytest.approx(2.0)
    assert mem.total == pytest.approx(tensors + 2.0)
    # The band: the tensors x0.90 (+ the context) to x1.10 (+ the allowance)
    assert (mem.total_low, mem.total_high) == pytest.approx((0.9 * tensors + 0.8, 1.1 * tensors + 2.0))
    assert mem.headroom == pytest.approx(1000.0 - mem.total)


# Korthikanti et al. 2022 with s = 1024, b = 2, h = 1024, a = 16, L = 8, V = 32000:
#   GPT layer, FlashAttention: 34·s·b·h = 71,303,168; eager: s·b·h·(34 + 5·a·s/h) = 239,075,328
#   Llama layer with FFN F = 2816 (measured on H200, forecast/memory.py): s·b·(H·h + 8·F), H = 33.5 for a
#   full fine-tune: 2048 x (34,304 + 22,528) = 116,391,936; 28 for LoRA: 2048 x 51,200 = 104,857,600
#   output layer: 4·s·b·h + 12·s·b·V = 8,388,608 + 786,432,000 = 794,820,608 (16-bit logits, fp32 copy, fp32
#   log-softmax and part of its gradient; 10·s·b·V before the LoRA measurements, 4·s·b·h·(1 + V/h) before
#   the GPT-2 ones)
#   checkpointed: L·6·s·b·h for a full fine-tune (its module holds fp32 weights, so its residual stream is
#   fp32; 2 for LoRA's bf16 base) + the larger of one layer and the output layer (its backward first)
ACTIVATIONS = [
    ("gpt", True, False, 8 * 71_303_168 + 794_820_608),
    ("gpt", False, False, 8 * 239_075_328 + 794_820_608),
    ("gpt", True, True, 8 * 6 * 1024 * 2 * 1024 + 794_820_608),
    ("llama", True, False, 8 * 116_391_936 + 794_820_608),
    ("llama", True, True, 8 * 6 * 1024 * 2 * 1024 + 794_820_608),
]


@pytest.mark.parametrize(("block", "flash", "checkpointing", "expected"), ACTIVATIONS)
def test_activations_by_hand(block: str, flash: bool, checkpointing: bool, expected: int) -> None:
    w = SMALL._replace(block=block, flash_attention=flash, activation_checkpointing=checkpointing)
    assert activations(w._replace(ffn_hidden_size=2816)) == pytest.approx(expected)


def test_checkpointed_peak_is_a_rebuilt_layer_when_it_outweighs_the_logits() -> None:
    """A small vocabulary: one layer's full activations (s·b·(H·h + 8·F)) are the larger peak, not the
    loss's."""
    w = SMALL._replace(block="llama", vocab_size=1000, activation_checkpointing=True, ffn_hidden_size=2816)
    assert activations(w) == pytest.approx(8 * 6 * 1024 * 2 * 1024 + 116_391_936)
    lora = w._replace(method="lora", trainable_fraction=0.01)  # a bf16 base keeps 2 bytes
    assert activations(lora) == pytest.approx(8 * 2 * 1024 * 2 * 1024 + 104_857_600)


def test_a_llama_layer_keeps_more_the_wider_its_ffn() -> None:
    """Issue #69: SwiGLU keeps four F-wide bf16 tensors a token (gate's and up's outputs, SiLU's output,
    down's input), so Qwen 2.5's FFN of 5.8h keeps ~75 bytes per s·b·h where Llama-2's 2.7h keeps 50; a flat
    50 per s·b·h (the model before) read the two alike."""
    llama = SMALL._replace(block="llama", method="lora", trainable_fraction=0.01, ffn_hidden_size=2816)
    wide = llama._replace(ffn_hidden_size=5952)  # 5.8h
    per_layer = 8 * 2048 * (5952 - 2816)  # 8 bytes per token per unit of F, one layer
    assert activations(wide) - activations(llama) == pytest.approx(8 * per_layer)


def test_activations_are_per_gpu_not_sharded() -> None:
    one, many = (memory(SMALL._replace(sharding="zero3"), BIG_GPU, gpus=n).activations for n in (1, 64))
    assert one == many


def test_worked_7b_full_adam_does_not_fit_one_80gb_gpu() -> None:
    """Article: weights ≈ 14 GB, gradients ≈ 14 GB, optimizer 84-112 GB: does not fit; must be sharded."""
    result = forecast(inp(dep=deployment(A100, gpus=1)))
    mem = result.memory
    assert mem.weights == pytest.approx(14.0)
    assert mem.gradients == pytest.approx(14.0)
    assert 84.0 <= mem.optimizer <= 112.0
    assert not mem.fits
    assert mem.total > 112.0


def test_worked_7b_full_fits_once_sharded_over_8() -> None:
    result = forecast(inp(dep=deployment(A100, gpus=8)))
    assert not result.memory.fits
    assert result.fixes[0].startswith("shard further: sharding zero1")
    sharded = forecast(inp(dep=deployment(A100, gpus=8), sharding="zero3"))
    assert sharded.memory.fits
    assert sharded.fixes == ()


@pytest.mark.parametrize("fraction", [0.001, 0.01])
def test_worked_7b_lora_fits_a_24_to_48gb_gpu(fraction: float) -> None:
    """Article: LoRA (0.1-1 % trainable) needs ≈ 14 GB of weights plus a few GB: fits a 24-48 GB GPU."""
    lora = SEVEN_B._replace(method="lora", trainable_fraction=fraction)
    mem = memory(lora._replace(activation_checkpointing=True), Hardware("24GB", 24.0, {}), gpus=1)
    assert 14.0 <= mem.weights <= 14.0 * 1.01
    assert mem.gradients + mem.optimizer <= 14.0 * fraction * 7  # (2 + 12) bytes per trainable parameter
    assert mem.fits
    assert memory(lora, Hardware("48GB", 48.0, {}), gpus=1).fits


def test_lora_zero3_shards_the_frozen_base_too() -> None:
    lora = SEVEN_B._replace(method="lora", trainable_fraction=0.01, sharding="zero3")
    assert memory(lora, A100, gpus=8).weights == pytest.approx(2 * 7.07e9 / 8 / 1e9)
