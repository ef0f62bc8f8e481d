"""FLOPs, hours, restarts and cost against the source article's worked figures and hand-computed cases."""

from __future__ import annotations

import pytest

from forecast import ForecastError, forecast
from forecast.compute import executed_flops, model_flops, sharding_share
from forecast.step import adapted_width
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
    """A model that any one change makes fit: sharding, then checkpointing, micro-batch, more GPUs, a larger
    GPU (named: issue #68)."""
    w = SEVEN_B._replace(sharding="zero1", micro_batch_per_gpu=3)  # 77.7 GB, at most 85.2, on 8 x 80 GB
    result = forecast(inp(w, deployment(A100, gpus=8)))
    assert not result.memory.fits
    kinds = [fix.split(":")[0] for fix in result.fixes]
    assert kinds == [
        "shard further",
        "checkpoint activations",
        "smaller micro-batch",
        "more GPUs",
        "a larger GPU",
    ]
    assert result.fixes[0] == "shard further: sharding zero3 (66.2 GB per GPU, at most 72.7)"
    assert "micro_batch_per_gpu 1 " in result.fixes[2]
    # more GPUs divide only the states: twice the GPUs, and the activations still leave little headroom
    assert (
        result.fixes[3] == "more GPUs: 16 GPUs in the job instead of 8 GPUs (72.4 GB per GPU, at most 79.5)"
    )


def test_fix_when_nothing_alone_is_enough() -> None:
    """70B full on 8 x 80 GB with ddp: only zero3 + checkpointing + micro-batch 1 on more GPUs fits."""
    big = SEVEN_B._replace(
        parameters=70e9, layers=80, hidden_size=8192, attention_heads=64, micro_batch_per_gpu=8
    )
    (fix,) = forecast(inp(big, deployment(A100, gpus=8))).fixes
    assert fix.startswith("no single change is enough; together: sharding zero3")


def test_lora_adapter_width_is_exact_for_llama_2_7b() -> None:
    """Llama-2-7B: 6,738,415,616 parameters, V = 32000, L = 32, h = 4096, FFN 11008, 32 KV heads:
    Σ(in + out) of q, k, v, o, gate, up, down = 4·8192 + 3·15104 = 78,080 (P/h + 7h)."""
    w = SEVEN_B._replace(parameters=6_738_415_616.0, method="lora", trainable_fraction=0.006)
    assert adapted_width(w) == pytest.approx(78_080, abs=3)  # the norms (2 a block) are not counted
    assert adapted_width(w._replace(method="full")) == adapted_width(w)  # a shape property


def test_zero3_exposed_share() -> None:
    """1/(1 + (1/3)(1024/h)²(16384/(s·b))): 7B shapes, s·b = 2048: 1/(1 + 1/6); other modes 1."""
    assert sharding_share(SEVEN_B._replace(sharding="zero3")) == pytest.approx(1 / (1 + 1 / 6))
    assert sharding_share(SEVEN_B) == 1.0
