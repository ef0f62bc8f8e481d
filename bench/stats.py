"""Pure figures for `scripts/bench`: medians and ranges, linear fits, scale conversion, counter diffs."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """Several runs of one figure."""

    median: float
    low: float
    high: float
    runs: int

    def text(self, digits: int = 1) -> str:
        if self.runs == 1 or self.low == self.high:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no runs to summarise")
    return Spread(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))


@dataclass(frozen=True)
class Fit:
    """y = slope * x + intercept, with R² (1.0 when every point lies on the line)."""

    slope: float
    intercept: float
    r2: float

    def at(self, x: float) -> float:
        return self.slope * x + self.intercept


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least squares over at least two distinct x values."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a linear fit needs at least two distinct x values, one y each")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    return Fit(slope, intercept, 1.0 if total == 0 else 1.0 - residual / total)


def at_scale_one(wall_s: float, fixed_s: float, scale: float) -> float:
    """Wall time at time scale 1 from a run at `scale`.

    Platform waits, poll intervals and quota pacing all run `scale` times faster in a scaled run; the
    engine's own CPU time (`fixed_s`, measured with the platform nearly instant) does not.
    """
    return fixed_s + scale * max(0.0, wall_s - fixed_s)


def counter_diff(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Requests per endpoint and outcome made between two `/_admin/counters` snapshots (zeros dropped)."""
    out: dict[str, dict[str, int]] = {}
    for endpoint, outcomes in after.items():
        old = before.get(endpoint, {})
        delta = {k: v - old.get(k, 0) for k, v in outcomes.items() if v - old.get(k, 0)}
        if delta:
            out[endpoint] = delta
    return out


POLL_ENDPOINTS = frozenset({"GET /v2/pods/{id}", "GET /v2/clusters/{id}/pods"})


def totals(diff: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Total requests, 429s, and reads of pod state (the endpoints readiness waits poll)."""
    total = sum(sum(o.values()) for o in diff.values())
    limited = sum(o.get("429", 0) for o in diff.values())
    polls = sum(sum(o.values()) for e, o in diff.items() if e in POLL_ENDPOINTS)
    return {"total": total, "429": limited, "polls": polls}


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; the first column is left-aligned, the others right-aligned."""
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = [header, align, *[[str(c) for c in r] for r in rows]]
    return "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
