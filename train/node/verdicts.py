"""Pure judgements of the straggler test and the burn-in (no torch here: tests feed recorded figures).

Straggler: every GPU of a node runs the same bf16 GEMM at once; a GPU fails below the GPU table's floor
(components/gpus.py, `bf16_gemm_floor_tflops`, with its source) or more than `tolerance_pct` below the
node's median. Burn-in: GEMM and all-reduce together for N minutes, sampled; it fails on a throttle reason
that means a sick or hot GPU, a temperature at the GPU's slowdown threshold, SM clocks dropping below the
GPU's own median, or bus bandwidth dropping below the run's median.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from train.node.nvml import BAD_THROTTLE_REASONS, THROTTLE_REASONS

CLOCK_WARMUP_S = 10.0  # clocks ramp up from idle at the start of a burn-in: those samples are not judged
MAX_DROP_FRACTION = 0.05  # a burn-in fails when more than this share of its clock samples are drops
BUSBW_PERCENTILE = 5  # bus bandwidth is judged on its 5th percentile, so one hiccup does not fail a node


def straggler_findings(
    tflops: Mapping[int, float], floor_tflops: float, tolerance_pct: float
) -> list[tuple[int, str]]:
    """(gpu, reason) for every GPU under the floor or too far under the node's median."""
    if not tflops:
        return []
    median = statistics.median(tflops.values())
    out = []
    for gpu, value in sorted(tflops.items()):
        if floor_tflops and value < floor_tflops:
            out.append((gpu, f"bf16 GEMM at {value:.0f} TFLOPS, under the floor of {floor_tflops:.0f}"))
        elif value < median * (1 - tolerance_pct / 100):
            pct = 100 * (1 - value / median)
            out.append(
                (
                    gpu,
                    f"bf16 GEMM at {value:.0f} TFLOPS, {pct:.0f}% under the node's median {median:.0f} "
                    f"(tolerance {tolerance_pct:g}%)",
                )
            )
    return out


@dataclass(frozen=True)
class GpuSample:
    """One NVML sample of one GPU during the burn-in."""

    t: float  # seconds since the burn-in started
    temperature_c: int | None
    sm_clock_mhz: int | None
    throttle_mask: int | None


@dataclass(frozen=True)
class BurnInLimits:
    clock_drop_pct: float  # a sample under the GPU's median SM clock by more than this is a drop
    busbw_drop_pct: float  # bus bandwidth's 5th percentile under its median by more than this fails
    slowdown_temp_c: Mapping[int, int]  # per GPU, from NVML (fallback: healthgate.FALLBACK_SLOWDOWN_C)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, round(pct / 100 * len(ordered) + 0.5))
    return ordered[min(rank, len(ordered)) - 1]


def gpu_summary(samples: Sequence[GpuSample], clock_drop_pct: float) -> dict[str, object]:
    """Temperature max, clock min / median / max, clock drops and throttle events of one GPU."""
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    judged = [s.sm_clock_mhz for s in samples if s.sm_clock_mhz is not None and s.t >= CLOCK_WARMUP_S]
    median = statistics.median(judged) if judged else None
    drops = sum(1 for c in judged if median and c < median * (1 - clock_drop_pct / 100))
    events = {
        name: sum(1 for s in samples if (s.throttle_mask or 0) & bit)
        for name, bit in THROTTLE_REASONS.items()
        if name != "gpu_idle"
    }
    return {
        "samples": len(samples),
        "temperature_max_c": max(temps) if temps else None,
        "sm_clock_mhz": {"min": min(judged), "median": median, "max": max(judged)} if judged else None,
        "clock_drops": drops,
        "clock_samples_judged": len(judged),
        "throttle_samples": {k: v for k, v in events.items() if v},
    }


def burn_in_findings(
    summaries: Mapping[int, Mapping[str, object]],
    busbw: Sequence[float],
    limits: BurnInLimits,
    fallback_slowdown_c: int,
) -> list[tuple[int | None, str]]:
    """(gpu or None for the node, reason) for every broken threshold."""
    out: list[tuple[int | None, str]] = []
    for gpu, s in sorted(summaries.items()):
        throttled = s.get("throttle_samples") or {}
        assert isinstance(throttled, dict)
        bad = {k: v for k, v in throttled.items() if k in BAD_THROTTLE_REASONS}
        if bad:
            listed = ", ".join(f"{k} in {v} sample(s)" for k, v in sorted(bad.items()))
            out.append((gpu, f"throttled during burn-in: {listed}"))
        temp = s.get("temperature_max_c")
        slowdown = limits.slowdown_temp_c.get(gpu) or fallback_slowdown_c
        if isinstance(temp, int) and temp >= slowdown:
            out.append((gpu, f"reached {temp} °C during burn-in, its slowdown threshold is {slowdown} °C"))
        drops, judged = s.get("clock_drops"), s.get("clock_samples_judged")
        if (
            isinstance(drops, int)
            and isinstance(judged, int)
            and judged
            and drops > MAX_DROP_FRACTION * judged
        ):
            out.append(
                (
                    gpu,
                    f"SM clock dropped more than {limits.clock_drop_pct:g}% under its median in "
                    f"{drops} of {judged} samples",
                )
            )
    if len(busbw) >= 2:
        median = statistics.median(busbw)
        low = percentile(busbw, BUSBW_PERCENTILE)
        if median > 0 and low < median * (1 - limits.busbw_drop_pct / 100):
            out.append(
                (
                    None,
                    f"all-reduce bus bandwidth fell to {low:.1f} GB/s (5th percentile) against a median "
                    f"of {median:.1f} GB/s during burn-in (tolerance {limits.busbw_drop_pct:g}%)",
                )
            )
    return out


def busbw_floor_finding(busbw_gbps: float, ranks: int, floor_gbps: float) -> str | None:
    """Why the all-reduce sweep's bus bandwidth fails its floor, or None (one rank moves no data)."""
    if ranks < 2 or busbw_gbps >= floor_gbps:
        return None
    return (
        f"all-reduce bus bandwidth {busbw_gbps:.2f} GB/s is under the floor of {floor_gbps:g} GB/s; a node "
        "is off the fabric or degraded"
    )


def busbw_summary(busbw: Sequence[float], times: Sequence[float], points: int = 60) -> dict[str, object]:
    """min / median / max and a timeline of at most `points` (t, GB/s) pairs, evenly thinned."""
    if not busbw:
        return {"samples": 0}
    step = max(1, len(busbw) // points)
    return {
        "samples": len(busbw),
        "min": min(busbw),
        "median": statistics.median(busbw),
        "max": max(busbw),
        "p5": percentile(busbw, BUSBW_PERCENTILE),
        "timeline": [[round(times[i], 1), round(busbw[i], 2)] for i in range(0, len(busbw), step)],
    }
