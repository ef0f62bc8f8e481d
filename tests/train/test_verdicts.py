"""Straggler and burn-in judgements, on the figures the H200 machine gave (docs/GPU-VALIDATION.md)."""

from __future__ import annotations

from train.node import verdicts
from train.node.nvml import THROTTLE_REASONS
from train.node.verdicts import BurnInLimits, GpuSample

H200_TFLOPS = {0: 674.8, 1: 670.3}  # the straggler test on nvidia-h200-x2, 2026-11-30
H100_SXM_FLOOR = 495.0  # components/gpus.py


def test_the_measured_node_passes() -> None:
    assert verdicts.straggler_findings(H200_TFLOPS, H100_SXM_FLOOR, 10) == []


def test_a_gpu_20_percent_slower_than_its_peers_fails_by_the_median_rule() -> None:
    node = {g: 672.0 for g in range(8)} | {3: 537.6}
    assert verdicts.straggler_findings(node, H100_SXM_FLOOR, 10) == [
        (3, "bf16 GEMM at 538 TFLOPS, 20% under the node's median 672 (tolerance 10%)")
    ]
    assert verdicts.straggler_findings(node, H100_SXM_FLOOR, 25) == []


def test_the_floor_catches_a_node_that_is_slow_as_a_whole() -> None:
    node = dict.fromkeys(range(8), 300.0)
    found = verdicts.straggler_findings(node, H100_SXM_FLOOR, 10)
    assert len(found) == 8 and found[0] == (0, "bf16 GEMM at 300 TFLOPS, under the floor of 495")


def _samples(
    clock: int = 1980, temp: int = 60, mask: int = THROTTLE_REASONS["sw_power_cap"]
) -> list[GpuSample]:
    return [GpuSample(float(t), temp, clock, mask) for t in range(0, 170)]


LIMITS = BurnInLimits(clock_drop_pct=20, busbw_drop_pct=50, slowdown_temp_c={0: 89, 1: 89})


def test_power_capping_is_normal_and_a_healthy_burn_in_passes() -> None:
    summaries = {g: verdicts.gpu_summary(_samples(), 20) for g in (0, 1)}
    assert summaries[0]["throttle_samples"] == {"sw_power_cap": 170}
    assert summaries[0]["clock_drops"] == 0 and summaries[0]["temperature_max_c"] == 60
    assert verdicts.burn_in_findings(summaries, [208.7] * 100, LIMITS, 90) == []


def test_thermal_throttle_heat_and_clock_drops_fail_the_gpu() -> None:
    hot = _samples(temp=89, mask=THROTTLE_REASONS["hw_thermal_slowdown"])
    dropping = [
        GpuSample(s.t, s.temperature_c, 1000 if s.t % 5 == 0 else 1980, s.throttle_mask) for s in _samples()
    ]
    summaries = {0: verdicts.gpu_summary(hot, 20), 1: verdicts.gpu_summary(dropping, 20)}
    found = verdicts.burn_in_findings(summaries, [], LIMITS, 90)
    assert found == [
        (0, "throttled during burn-in: hw_thermal_slowdown in 170 sample(s)"),
        (0, "reached 89 °C during burn-in, its slowdown threshold is 89 °C"),
        (1, "SM clock dropped more than 20% under its median in 32 of 160 samples"),
    ]


def test_clock_ramp_at_the_start_is_not_a_drop() -> None:
    ramp = [GpuSample(float(t), 40, 345 if t < 5 else 1980, 0) for t in range(60)]
    assert verdicts.gpu_summary(ramp, 20)["clock_drops"] == 0


def test_bus_bandwidth_rule_uses_the_5th_percentile() -> None:
    # The H200 burn-in read p5 153.5 against a median of 208.7 GB/s: healthy, and under 50% it passes.
    healthy = [153.5] * 5 + [208.7] * 90 + [260.4] * 5
    assert verdicts.burn_in_findings({}, healthy, LIMITS, 90) == []
    one_hiccup = [86.3] + [208.7] * 99  # the run's minimum, once: below the 5th percentile, so not judged
    assert verdicts.burn_in_findings({}, one_hiccup, LIMITS, 90) == []
    fallen = [20.0] * 10 + [208.7] * 90  # NVLink fell back to PCIe for a tenth of the run
    ((gpu, why),) = verdicts.burn_in_findings({}, fallen, LIMITS, 90)
    assert gpu is None and why.startswith("all-reduce bus bandwidth fell to 20.0 GB/s (5th percentile)")


def test_busbw_floor_and_summary() -> None:
    assert verdicts.busbw_floor_finding(313.96, 2, 200) is None
    assert verdicts.busbw_floor_finding(0.0, 1, 200) is None  # one rank moves no data
    assert "3.50 GB/s is under the floor of 100 GB/s" in (verdicts.busbw_floor_finding(3.5, 64, 100) or "")
    summary = verdicts.busbw_summary([1.0, 2.0, 3.0] * 100, [float(t) for t in range(300)])
    assert (summary["min"], summary["median"], summary["max"], summary["samples"]) == (1.0, 2.0, 3.0, 300)
    assert isinstance(summary["timeline"], list) and len(summary["timeline"]) == 60
