"""The report's forecast section: memory per GPU, hours and run cost before → after. Pure.

Both sides are the stack output `forecast` (forecast.model.Forecast.to_output): before from the state,
after from the preview, so a change that doubles `tokens` reads as the run going from $X to $2X.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Figure = Callable[[Mapping[str, Any]], float | None]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _memory(fc: Mapping[str, Any]) -> float | None:
    mem = fc.get("memory_gb_per_gpu")
    return _num(mem.get("total")) if isinstance(mem, Mapping) else None


def _field(key: str) -> Figure:
    return lambda fc: _num(fc.get(key))


# (label, figure, format of one value)
_ROWS: tuple[tuple[str, Figure, str], ...] = (
    ("memory per GPU, GB", _memory, "{:,.1f}"),
    ("training FLOPs", _field("flops"), "{:.3g}"),
    ("hours", _field("hours"), "{:,.1f}"),
    ("restarts (max_run_hours)", _field("restarts"), "{:.0f}"),
    ("run cost, on-demand", _field("run_cost_usd"), "${:,.2f}"),
    ("run cost, at the spot bid", _field("spot_run_cost_usd"), "${:,.2f}"),
)


def _fits(fc: Mapping[str, Any] | None) -> str:
    if fc is None:
        return "n/a"
    mem = fc.get("memory_gb_per_gpu")
    gpu = _num(mem.get("gpu")) if isinstance(mem, Mapping) else None
    of = f" of {gpu:g} GB" if gpu is not None else ""
    return ("yes" if fc.get("fits") else "**no**") + of


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


def forecast_table(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
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
    return rows


def forecast_json(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """Both sides as the stack output holds them, and the run cost's delta."""
    cost = [_field("run_cost_usd")(fc) if fc is not None else None for fc in (before, after)]
    delta = None if cost[0] is None or cost[1] is None else round(cost[1] - cost[0], 2)
    return {"before": before, "after": after, "delta_run_cost_usd": delta}
