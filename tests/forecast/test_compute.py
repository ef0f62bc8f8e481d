"""FLOPs, hours, restarts and cost against the source article's worked figures and hand-computed cases."""

from __future__ import annotations

import pytest

from forecast import ForecastError, forecast
from forecast.compute import (
    adapted_width,
    adapter_seconds_per_token,
    assumed_mfu,
    executed_flops,
    frozen_base_seconds_per_token,
    model_flops,
)
from tests.forecast.factories import A100, H100, SEVEN_B, deployment, inp

ARTICLE_MFU = 100 / 312  # "100 TFLOPS effective on one A100 (312 peak)"


def test_worked_7b_flops() -> None:
    """6 x 7e9 x 5e8 = 2.1e19 FLOPs."""
    assert model_flops(SEVEN_B) == pytest.approx(2.1e19)


def test_worked_7b_hours_on_one_and_eight_a100s() -> None:
    """2.1e5 s ≈ 58 h on one A100 at 100 TFLOPS; on 8 ≈ 7 h ideal, 9-10 h with overhead."""
    one = forecast(inp(dep=deployment(A100, gpus=1), mfu=ARTICLE_MFU)).compute
    assert one.effective_tflops_per_gpu == pytest.approx(100.0)
    assert one.gpu_hours * 3600 == pytest.approx(2.1e5)
    assert one.ideal_hours == pytest.approx(58.33, abs=0.01)
    eight = forecast(inp(dep=deployment(A100, gpus=8), mfu=ARTICLE_MFU)).compute
    assert eight.ideal_hours == pytest.approx(7.29, abs=0.01)
    assert 9.0 <= eight.hours <= 10.0  # 7.29 x 1.3 = 9.48


def test_lora_flops_by_hand() -> None:
    """(4Ψ + 6Ψt)·T: Ψ = 1e9, Ψt = 1e7, T = 1e9 -> 4.06e18; recompute adds 2(Ψ + Ψt)T = 2.02e18."""
    lora = SEVEN_B._replace(parameters=1e9, tokens=1e9, method="lora", trainable_fraction=0.01)
    assert model_flops(lora) == pytest.approx(4.06e18)
    assert executed_flops(lora) == pytest.approx(4.06e18)
    assert executed_flops(lora._replace(activation_checkpointing=True)) == pytest.approx(6.08e18)


def test_default_mfu_counts_the_recompute() -> None:
    assert assumed_mfu(SEVEN_B) == pytest.approx(0.45)
    assert assumed_mfu(SEVEN_B._replace(activation_checkpointing=True)) == pytest.approx(0.3375)  # 0.45 x 6/8
    assert assumed_mfu(SEVEN_B._replace(precision="fp8")) == pytest.approx(0.45 * 1.3 / 2)
    assert assumed_mfu(SEVEN_B._replace(mfu=0.5, activation_checkpointing=True)) == 0.5


def test_throughput_per_gpu() -> None:
    """100 TFLOPS / (6 x 7e9 FLOPs a token) = 2,381 tokens per GPU-second."""
    c = forecast(inp(dep=deployment(A100, gpus=8), mfu=ARTICLE_MFU)).compute
    assert c.tokens_per_gpu_second == pytest.approx(1e14 / 4.2e10)


def test_restarts_from_max_run_hours() -> None:
    """9.48 h with a 4 h watchdog: 3 segments, 2 restarts; exactly 2 segments needs 1 restart."""
    dep = deployment(A100, gpus=8, max_run_hours=4.0)
    c = forecast(inp(dep=dep, mfu=ARTICLE_MFU)).compute
    assert (c.segments, c.restarts) == (3, 2)
    exact = forecast(inp(dep=dep._replace(max_run_hours=c.hours / 2), mfu=ARTICLE_MFU)).compute
    assert (exact.segments, exact.restarts) == (2, 1)


def test_cost_on_demand_and_spot() -> None:
    """Run cost = hours x (compute + storage); spot at the bid."""
    dep = deployment(
        H100, gpus=8, compute_usd_per_hour=31.92, spot_compute_usd_per_hour=19.92, storage_usd_per_hour=0.08
    )
    result = forecast(inp(dep=dep, sharding="zero3", mfu=0.5))
    hours = 2.1e19 / (989.4e12 * 0.5) / 3600 / 8 * 1.3
    assert result.compute.hours == pytest.approx(hours)
    assert result.cost.run_usd == pytest.approx(hours * 32.0)
    assert result.cost.spot_run_usd == pytest.approx(hours * 20.0)
    assert forecast(inp(dep=deployment(H100), sharding="zero3")).cost.spot_run_usd is None


def test_doubling_tokens_doubles_hours_and_cost() -> None:
    one, two = (forecast(inp(tokens=t, sharding="zero3")) for t in (5e8, 1e9))
    assert two.compute.hours == pytest.approx(2 * one.compute.hours)
    assert two.cost.run_usd == pytest.approx(2 * one.cost.run_usd)


def test_fp8_on_a_gpu_without_fp8_is_an_error() -> None:
    with pytest.raises(ForecastError, match="A100_80GB has no fp8 tensor cores; use one of: bf16"):
        forecast(inp(precision="fp8"))


def test_fixes_cheapest_first() -> None:
    """A model that any one change makes fit: sharding, then checkpointing, micro-batch, more GPUs."""
    w = SEVEN_B._replace(sharding="zero1", micro_batch_per_gpu=2)  # 77.0 GB, at most 91.1, on 8 x 80 GB
    result = forecast(inp(w, deployment(A100, gpus=8)))
    assert not result.memory.fits
    kinds = [fix.split(":")[0] for fix in result.fixes]
    assert kinds == ["shard further", "checkpoint activations", "smaller micro-batch", "more GPUs"]
    assert result.fixes[0] == "shard further: sharding zero2 (63.3 GB per GPU, at most 75.8)"
    assert "micro_batch_per_gpu 1 " in result.fixes[2]
    assert "56 in the job instead of 8" in result.fixes[3]


def test_fix_when_nothing_alone_is_enough() -> None:
    """70B full on 8 x 80 GB with ddp: only zero3 + checkpointing + micro-batch 1 on more GPUs fits."""
    big = SEVEN_B._replace(
        parameters=70e9, layers=80, hidden_size=8192, attention_heads=64, micro_batch_per_gpu=8
    )
    (fix,) = forecast(inp(big, deployment(A100, gpus=8))).fixes
    assert fix.startswith("no single change is enough; together: sharding zero3")


def test_default_mfu_scales_for_small_hidden_sizes_and_zero3() -> None:
    """docs/FORECAST.md: x min(1, h/2048)^0.5; zero3 x 1/(1 + (1/3)(1024/h)²(16384/(s·b)))."""
    assert assumed_mfu(SEVEN_B._replace(hidden_size=8192)) == pytest.approx(0.45)  # large: unchanged
    assert assumed_mfu(SEVEN_B._replace(hidden_size=2048)) == pytest.approx(0.45)
    assert assumed_mfu(SEVEN_B._replace(hidden_size=1024)) == pytest.approx(0.45 * 0.5**0.5)
    # 7B shapes, s·b = 2048: exposed share (1/3)·(1/16)·8 = 1/6.
    assert assumed_mfu(SEVEN_B._replace(sharding="zero3")) == pytest.approx(0.45 / (1 + 1 / 6))
    assert assumed_mfu(SEVEN_B._replace(sharding="zero3", mfu=0.5)) == 0.5  # a measured MFU holds it all


def test_lora_adapter_width_is_exact_for_llama_2_7b() -> None:
    """Llama-2-7B: 6,738,415,616 parameters, V = 32000, L = 32, h = 4096, FFN 11008, 32 KV heads:
    Σ(in + out) of q, k, v, o, gate, up, down = 4·8192 + 3·15104 = 78,080 (P/h + 7h)."""
    w = SEVEN_B._replace(parameters=6_738_415_616.0, method="lora", trainable_fraction=0.006)
    assert adapted_width(w) == pytest.approx(78_080, abs=3)  # the norms (2 a block) are not counted
    assert adapted_width(w._replace(method="full")) == adapted_width(w)  # a shape property


def test_lora_adds_memory_bound_adapter_time_by_hand() -> None:
    """40 bytes (61 checkpointed) x L x W per token over the HBM bandwidth; none for a full fine-tune; not set
    by the rank; added to the frozen base's two terms."""
    w = SEVEN_B._replace(parameters=6_738_415_616.0, method="lora", trainable_fraction=0.006)
    expected = 40.0 * 32 * adapted_width(w) / 3.35e12
    assert adapter_seconds_per_token(w, 3.35) == pytest.approx(expected)
    assert adapter_seconds_per_token(w._replace(trainable_fraction=0.024), 3.35) == pytest.approx(expected)
    assert adapter_seconds_per_token(w._replace(method="full"), 3.35) == 0.0
    checkpointed = w._replace(activation_checkpointing=True)
    assert adapter_seconds_per_token(checkpointed, 3.35) == pytest.approx(expected * 61.0 / 40.0)
    c = forecast(inp(w, deployment(H100, gpus=1))).compute
    base = frozen_base_seconds_per_token(w, 989.4, 3.35)
    assert 1 / c.tokens_per_gpu_second == pytest.approx(base + expected)
    assert c.mfu == pytest.approx(model_flops(w) / w.tokens * c.tokens_per_gpu_second / 989.4e12)
    c = forecast(inp(checkpointed, deployment(H100, gpus=1))).compute
    base = frozen_base_seconds_per_token(checkpointed, 989.4, 3.35)
    assert 1 / c.tokens_per_gpu_second == pytest.approx(base + expected * 61.0 / 40.0)
    assert forecast(inp(w, deployment(H100, gpus=1), mfu=0.3)).compute.mfu == 0.3  # a measured MFU holds it


def test_lora_frozen_base_in_two_terms_by_hand() -> None:
    """Llama-2-7B (P = 202,383,488 a block, FFN 11008 from P, 32 KV heads), s 2048, on an H200 (989.4 TFLOP/s,
    4.8 TB/s): matmuls at 0.82 of peak, attention at 0.435, the elementwise bytes at HBM bandwidth."""
    w = SEVEN_B._replace(parameters=6_738_415_616.0, method="lora", trainable_fraction=0.006)
    per_block, h = 202_383_488, 4096
    mm_plain = 2 * 2 * 32 * per_block + 4 * 32000 * h  # forward + input gradient; the LM head, not the lookup
    att_plain = 2 * 2048 * h * 32 * (1 + 2.5)
    bytes_plain = 32 * (761 * h + 304 * h + 82 * 11008) * 0.87 + 57 * 32000
    by_hand = mm_plain / (0.82 * 989.4e12) + att_plain / (0.435 * 989.4e12) + bytes_plain / 4.8e12
    assert frozen_base_seconds_per_token(w, 989.4, 4.8) == pytest.approx(
        by_hand, rel=1e-5
    )  # P holds the norms
    ckpt = w._replace(activation_checkpointing=True)  # the recompute: one more pass of matmuls and attention
    mm_ckpt = mm_plain + 2 * 32 * per_block
    att_ckpt = 2 * 2048 * h * 32 * (2 + 2.5)
    bytes_ckpt = 32 * (761 * h + 304 * h + 82 * 11008) + 57 * 32000
    by_hand = mm_ckpt / (0.82 * 989.4e12) + att_ckpt / (0.435 * 989.4e12) + bytes_ckpt / 4.8e12
    assert frozen_base_seconds_per_token(ckpt, 989.4, 4.8) == pytest.approx(by_hand, rel=1e-5)
    # 89.0 and 89.6 µs a token measured for this base on an H200 (docs/GPU-VALIDATION.md)
    assert 1e6 * by_hand == pytest.approx(89.3, abs=1.0)
    # full fine-tunes and other precisions keep the one utilisation U
    full = forecast(inp(ckpt._replace(method="full", trainable_fraction=1.0), deployment(H100, gpus=1)))
    assert full.compute.mfu == pytest.approx(0.45 * 6 / 8)
