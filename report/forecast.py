"""The report's forecast section: memory per GPU, hours and run cost before → after. Pure.

Both sides are the stack output `forecast` (forecast.model.Forecast.to_output): before from the state,
after from the preview, so a change that doubles `tokens` reads as the run going from $X to $2X. The memory
row shows the verdict on the forecast's uncertainty band ("may not fit: X-Y GB"), and a last line the
cheapest feasible GPU type, node count and sharding of the preview (forecast.compare), with its saving.
A forecast recorded before the band or the comparison existed shows without them. Both sides arrive parsed
(report/parse.py, into common/outputs.py's ForecastOutput), so every figure here is a typed field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from common.outputs import ForecastOutput
from policy.stock import describe, group

Figure = Callable[[ForecastOutput], float | None]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# (label, figure, format of one value)
_ROWS: tuple[tuple[str, Figure, str], ...] = (
    ("memory per GPU, GB", lambda fc: fc.memory.total, "{:,.1f}"),
    ("training FLOPs", lambda fc: fc.flops, "{:.3g}"),
    ("hours", lambda fc: fc.hours, "{:,.1f}"),
    ("restarts (max_run_hours)", lambda fc: fc.restarts, "{:.0f}"),
    ("run cost, on-demand", lambda fc: fc.run_cost_usd, "${:,.2f}"),
    ("run cost, at the spot bid", lambda fc: fc.spot_run_cost_usd, "${:,.2f}"),
)


def _fits(fc: ForecastOutput | None) -> str:
    if fc is None:
        return "n/a"
    mem = fc.memory
    of = f" of {mem.gpu:g} GB"
    low, high = mem.total_low, mem.total_high
    band = f" ({low:,.1f}-{high:,.1f} GB)" if low is not None and high is not None else ""
    if fc.verdict == "may not fit":
        return f"**may not fit**{band}{of}"
    if fc.verdict == "does not fit" or not fc.fits:
        return f"**no**{band}{of}"
    return f"yes{band}{of}"


def cheapest_line(fc: ForecastOutput | None) -> str | None:
    """`cheapest feasible: 8 x 8 B200, zero1 $3,112.54 (-$1,134.62)`; None without a comparison."""
    summary = fc.compare if fc is not None else None
    if not isinstance(summary, Mapping):
        return None
    best = summary.get("cheapest_feasible")
    if not isinstance(best, Mapping):
        return "cheapest feasible: none of the GPU types, node counts and shardings RunPod rents fits"
    cost, saving = _num(best.get("run_cost_usd")), _num(summary.get("saving_usd"))
    if cost is None:
        return None
    shape = f"{best.get('nodes')} x {best.get('gpus_per_node')} {best.get('gpu')}, {best.get('sharding')}"
    if best.get("is_configured"):
        return f"cheapest feasible: {shape} ${cost:,.2f} (the stack as configured)"
    tail = f" (-${saving:,.2f})" if saving is not None else ""
    return f"cheapest feasible: {shape} ${cost:,.2f}{tail} (`scripts/forecast <stack> --compare`)"


def capacity_lines(changes: Sequence[Any]) -> list[str]:
    """`capacity now: 8 x 8 H100 SXM: none free in EU-RO-1, LOW in US-TX-3`, one per GPU shape, from the
    pods' and clusters' `availability` read at preview (policy.stock formats it as the policy does)."""
    found = [
        ("cluster" if c.type.endswith(":InstantCluster") else "pod", c.availability)
        for c in changes
        if isinstance(getattr(c, "availability", None), Mapping)
    ]
    return [f"capacity now: {describe(cap, nodes)}" for cap, nodes in group(found)]


def _cell(fmt: str, value: float | None) -> str:
    return "n/a" if value is None else fmt.format(value)


def _delta(fmt: str, before: float | None, after: float | None) -> tuple[str, str]:
    if before is None or after is None:
        return "n/a", "n/a"
    diff = after - before
    sign = "+" if diff >= 0 else "-"
    text = sign + fmt.format(abs(diff))
    if before == 0:
        return text, "new" if after else "0%"
    return text, f"{diff / before * 100:+.1f}%"


def forecast_table(before: ForecastOutput | None, after: ForecastOutput | None) -> list[str]:
    """Markdown lines of the section; empty when neither side has a forecast (no training.model)."""
    if before is None and after is None:
        return []
    rows = [
        "**Forecast** (training.model; `scripts/forecast <stack>` prints the breakdown):",
        "",
        "| | before | after | delta | change |",
        "|---|---:|---:|---:|---:|",
        f"| fits the GPU's memory | {_fits(before)} | {_fits(after)} | | |",
    ]
    for label, figure, fmt in _ROWS:
        b = figure(before) if before is not None else None
        a = figure(after) if after is not None else None
        if a is None and b is None:
            continue
        delta, change = _delta(fmt, b, a)
        rows.append(f"| {label} | {_cell(fmt, b)} | {_cell(fmt, a)} | {delta} | {change} |")
    shape = f"| jobs × GPUs each | {_shape(before)} | {_shape(after)} | | |"  # noqa: RUF001 (the sign)
    rows.insert(6, shape)
    meaning = jobs_line(before, after)
    rows += ["", meaning] if meaning else []
    line = cheapest_line(after)
    if line is not None:
        rows += ["", line]
    return rows


def _shape(fc: ForecastOutput | None) -> str:
    return "n/a" if fc is None else f"{fc.jobs} × {fc.gpus_per_job}"  # noqa: RUF001


def jobs_line(before: ForecastOutput | None, after: ForecastOutput | None) -> str | None:
    """What a change of nodes means for the run, said once (issue #68): in a `pods` stack every pod is a job
    of its own (a node more is a run more at the same hours: the cost grows, the run is no faster); in an
    Instant Cluster the nodes are one job (more GPUs share it: fewer hours)."""
    if after is None:
        return None
    if after.jobs > 1 and (before is None or before.jobs != after.jobs):
        was = f" (was {before.jobs})" if before is not None else ""
        return (
            f"**{after.jobs} independent jobs**{was} of {after.gpus_per_job} GPUs each: each pod of a `pods` "
            "stack trains its own job (a search's trials), so a node more is one more run of the same hours "
            "and its cost, not a faster run; for one job over more GPUs use `topology: cluster`"
        )
    if before is not None and after.jobs == before.jobs == 1 and after.gpus_per_job != before.gpus_per_job:
        return (
            f"one job over {after.gpus_per_job} GPUs (was {before.gpus_per_job}): the nodes share the run, "
            f"so its hours go {before.hours:,.1f} → {after.hours:,.1f}"
        )
    return None


def forecast_json(before: ForecastOutput | None, after: ForecastOutput | None) -> dict[str, Any]:
    """Both sides as their record writes them (ForecastOutput.to_output), and the run cost's delta."""
    delta = None if before is None or after is None else round(after.run_cost_usd - before.run_cost_usd, 2)
    return {
        "before": None if before is None else before.to_output(),
        "after": None if after is None else after.to_output(),
        "delta_run_cost_usd": delta,
    }
