"""The one step model (forecast/step.py) and the shapes it reads (forecast/shapes.py), by hand."""

from __future__ import annotations

import pytest

from forecast import forecast
from forecast.compute import model_flops, seconds_per_token
from forecast.model import Hardware
from forecast.shapes import assumed, ffn_width, gemms, kv_heads, kv_width
from forecast.step import (
    HOST_SECONDS,
    STEP_CONSTANTS,
    adapter_seconds,
    features,
    host_seconds,
    kernels,
    step_parts,
)
from tests.forecast.factories import H100, SEVEN_B, deployment, inp

H200 = Hardware("H200_SXM", 141.0, {"bf16": 989.4, "fp8": 1979.0}, 4.8)
LLAMA_3_8B = SEVEN_B._replace(parameters=8_030_261_248.0, vocab_size=128256)
LLAMA_2_7B = SEVEN_B._replace(parameters=6_738_415_616.0, kv_heads=32)


def test_usual_shapes_are_assumed_and_said() -> None:
    """Llama-3-8B: 32 heads -> 8 key-value heads, and what the parameters leave is its FFN 14336."""
    assert kv_heads(LLAMA_3_8B) == 8 and kv_width(LLAMA_3_8B) == 1024
    assert ffn_width(LLAMA_3_8B) == 14336
    assert [n.split()[0] for n in assumed(LLAMA_3_8B)] == ["kv_heads", "ffn_hidden_size"]
    # Llama-2-7B is multi-head: a user says so, and the FFN follows (11008; the norms round it)
    assert ffn_width(LLAMA_2_7B) == 11008
    given = LLAMA_3_8B._replace(kv_heads=8, ffn_hidden_size=14336)
    assert assumed(given) == ()
    assert kv_heads(SEVEN_B._replace(attention_heads=12, hidden_size=768)) == 12  # not a multiple of 8


def test_gemm_flops_and_bytes_by_hand() -> None:
    """One layer, h 1024, 8 heads (kv 1024), FFN 2816, V 32000, s·b 1024; full, no checkpointing: each GEMM
    three times (forward, input and weight gradient)."""
    w = SEVEN_B._replace(
        layers=1, hidden_size=1024, attention_heads=8, kv_heads=8, ffn_hidden_size=2816, sequence_length=1024
    )
    shapes = {(g.n, g.k) for g in gemms(w)}
    assert shapes == {(1024, 1024), (2816, 1024), (1024, 2816), (32000, 1024)}
    t = 1024
    mnk = 4 * t * 1024 * 1024 + 3 * t * 2816 * 1024 + t * 32000 * 1024
    operands = 4 * (t * 1024 + 1024 * 1024 + t * 1024) + 2 * (t * 1024 + 1024 * 2816 + t * 2816)
    operands += t * 2816 + 2816 * 1024 + t * 1024 + t * 1024 + 1024 * 32000 + t * 32000
    f = features(w, H200)
    assert f["matmul_flops"] == pytest.approx(3 * 2 * mnk / 989.4e12)
    assert f["matmul_bytes"] == pytest.approx(3 * 2 * operands / 4.8e12)
    assert f["attention"] == pytest.approx(2 * 1024 * 1024 * t * 3.5 / 989.4e12)
    elementwise = t * ((761 * 1024 + 304 * 1024 + 82 * 2816) * 0.87 + 57 * 32000)
    assert f["elementwise"] == pytest.approx(elementwise / 4.8e12)
    assert f["optimizer"] == pytest.approx(7e9 / 4.8e12)
    # the host: kernels (69 + 145.6 a layer, full, not checkpointed) at 31 µs, no checkpoint or peft layers
    assert f["host"] == pytest.approx((68.8 + 145.6) * 3.119e-5)


def test_lora_is_a_case_of_the_one_model() -> None:
    """LoRA = the same GEMMs without the weight-gradient pass, the optimizer over the adapters only, and
    the adapters' memory-bound passes (61 bytes checkpointed, 40 not); frozen layers alone add none."""
    full = LLAMA_2_7B._replace(activation_checkpointing=True)
    lora = full._replace(method="lora", trainable_fraction=0.006)
    f, g = features(full, H200), features(lora, H200)
    # layers: 4 passes full (fwd, recompute, 2 gradients) against 3; the head 3 against 2
    assert 0.70 < g["matmul_flops"] / f["matmul_flops"] < 0.76
    assert g["optimizer"] == pytest.approx(0.006 * f["optimizer"])
    assert g["elementwise"] == f["elementwise"] and g["attention"] == f["attention"]
    width = 32 * (LLAMA_2_7B.parameters - 2 * 32000 * 4096) / (32 * 4096) + 32 * 7 * 4096
    assert adapter_seconds(lora, H200) == pytest.approx(61 * 2048 * width / 4.8e12)
    assert adapter_seconds(lora._replace(activation_checkpointing=False), H200) == pytest.approx(
        40 * 2048 * width / 4.8e12
    )
    assert adapter_seconds(lora._replace(trainable_fraction=0.0), H200) == 0.0
    assert adapter_seconds(full, H200) == 0.0


def test_parts_add_up_and_the_recompute_is_what_checkpointing_adds() -> None:
    w = LLAMA_3_8B._replace(micro_batch_per_gpu=4, activation_checkpointing=True)
    parts = step_parts(w, H200)
    plain = step_parts(w._replace(activation_checkpointing=False), H200)
    assert parts.recompute == pytest.approx(parts.total - plain.total)
    assert parts.latency == 0.0  # 8192 tokens of an 8B layer keep the GPU busier than the host
    assert parts.communication == 0.0
    assert seconds_per_token(w, H200) == pytest.approx(parts.total / 8192)


def test_host_latency_binds_only_when_it_is_longer() -> None:
    """A 1024-wide model at 1024 tokens: the host's launches (69 + 8 x 145.6 kernels at 31 µs, scaled to
    the sweep's host) and then the optimizer step outlast the GPU's work, and the step is their sum."""
    tiny = SEVEN_B._replace(
        parameters=168e6, layers=8, hidden_size=1024, attention_heads=8, sequence_length=1024, kv_heads=8
    )
    parts = step_parts(tiny, H200)
    assert parts.latency > 0
    host = STEP_CONSTANTS["host"] * (68.8 + 8 * 145.6) * HOST_SECONDS["kernel"]
    assert parts.total == pytest.approx(host + parts.optimizer)


def test_the_host_counts_kernels_and_the_python_of_checkpointing_and_peft() -> None:
    """Per step: kernels by method and checkpointing (HOST_KERNELS, counted on an H200), plus per
    checkpointed layer and per layer with peft's adapters (HOST_SECONDS); frozen layers have no adapters."""
    w = SEVEN_B._replace(layers=8)
    ckpt = w._replace(activation_checkpointing=True)
    lora = ckpt._replace(method="lora", trainable_fraction=0.01)
    assert kernels(w) == pytest.approx(68.8 + 8 * 145.6)
    assert kernels(ckpt) == pytest.approx(68.8 + 8 * 192.6)
    assert host_seconds(ckpt) == pytest.approx(kernels(ckpt) * 3.119e-5 + 8 * 3.051e-3)
    assert host_seconds(lora) == pytest.approx(kernels(lora) * 3.119e-5 + 8 * (3.051e-3 + 1.817e-3))
    frozen = lora._replace(trainable_fraction=0.0)
    assert host_seconds(frozen) == pytest.approx(kernels(frozen) * 3.119e-5 + 8 * 3.051e-3)


def test_zero3_communication_and_a_given_mfu() -> None:
    w = LLAMA_3_8B._replace(sharding="zero3")
    parts = step_parts(w, H200, sharding_share=0.8)
    busy = parts.total - parts.communication
    assert parts.communication == pytest.approx(busy * 0.25)
    c = forecast(inp(LLAMA_3_8B._replace(mfu=0.3), deployment(H100, gpus=1))).compute
    assert c.mfu == 0.3
    assert c.tokens_per_gpu_second == pytest.approx(0.3 * 989.4e12 / (model_flops(LLAMA_3_8B) / 5e8))


def test_fp8_is_marked_assumed_and_bf16_is_not() -> None:
    """No fp8 run was measured: its matmul peak is the datasheet's at the bf16-fitted share, and says so."""
    given = {"kv_heads": 8, "ffn_hidden_size": 14336}
    fp8 = forecast(inp(LLAMA_3_8B._replace(precision="fp8", **given), deployment(H100, gpus=8)))
    bf16 = forecast(inp(LLAMA_3_8B._replace(**given), deployment(H100, gpus=8)))
    assert bf16.assumed == ()
    (note,) = fp8.assumed
    assert note.startswith("fp8 matmuls at the GPU's datasheet FP8 peak x 0.86")


def test_fp8_runs_the_matmuls_at_the_fp8_peak_only() -> None:
    bf16, fp8 = (features(LLAMA_3_8B._replace(precision=p), H200) for p in ("bf16", "fp8"))
    assert fp8["matmul_flops"] == pytest.approx(bf16["matmul_flops"] / 2, rel=1e-3)
    assert fp8["attention"] == bf16["attention"] and fp8["elementwise"] == bf16["elementwise"]
