"""The continuous straggler check: a node whose step time stays behind the others' for a while, pure.

The start-up preflight (train/node/preflight.py) finds a slow GPU before training; this one finds the node
that becomes slow during it (a throttling GPU, a failing link, a noisy neighbour). Input is what the agents
already serve, one sample per round: each node's mean step time (the progress contract) and, where NVML
gives one, its GEMM rate. A node is a straggler when, in every round of the last `for_s` seconds, its step
time is more than `tolerance_pct` above the median of the *other* nodes (or its GEMM rate that much below
theirs). Comparing against the others, not against a fixed figure, keeps a model change or a bigger batch
from reading as a fault. nvidia-resiliency-ext scores ranks inside the job (it wraps the training loop and
needs the job to import it); trainstack supervises jobs it did not write, so it scores nodes from outside.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One round: per node (rank), its mean step time in seconds and, where known, its GEMM TFLOP/s."""

    time: float
    step_time_s: Mapping[int, float]
    gemm_tflops: Mapping[int, float] | None = None


@dataclass(frozen=True)
class Straggler:
    rank: int
    behind_pct: float  # how far behind the others' median in the newest round, percent
    since: float  # the first round of the streak
    measure: str  # "step time" or "GEMM rate"

    def line(self) -> str:
        return f"node {self.rank}: {self.measure} {self.behind_pct:.0f}% behind the other nodes' median"


def _behind(values: Mapping[int, float], rank: int, slower_is_higher: bool) -> float | None:
    """Percent this rank is behind the median of the others; None with fewer than two nodes."""
    others = [v for r, v in values.items() if r != rank and v > 0]
    if rank not in values or not others or values[rank] <= 0:
        return None
    median = statistics.median(others)
    ratio = values[rank] / median if slower_is_higher else median / values[rank]
    return (ratio - 1) * 100


def stragglers(samples: Sequence[Sample], tolerance_pct: float, for_s: float) -> list[Straggler]:
    """Nodes behind by more than `tolerance_pct` in every sample of a streak at least `for_s` long that
    reaches the newest sample. Samples may come in any order."""
    ordered = sorted(samples, key=lambda s: s.time, reverse=True)
    if not ordered:
        return []
    found: list[Straggler] = []
    for measure in ("step time", "GEMM rate"):
        newest = ordered[0].step_time_s if measure == "step time" else ordered[0].gemm_tflops or {}
        for rank in sorted(newest):
            streak_start, first_gap = None, None
            for sample in ordered:
                values = sample.step_time_s if measure == "step time" else sample.gemm_tflops or {}
                gap = _behind(values, rank, slower_is_higher=measure == "step time")
                if gap is None or gap <= tolerance_pct:
                    break
                streak_start = sample.time
                first_gap = gap if first_gap is None else first_gap
            long_enough = streak_start is not None and ordered[0].time - streak_start >= for_s
            if long_enough and first_gap is not None and all(s.rank != rank for s in found):
                assert streak_start is not None
                found.append(Straggler(rank, first_gap, streak_start, measure))
    return found
