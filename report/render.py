"""Render parsed previews as one Markdown report (for a pull request comment) and as JSON. Pure."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from common import contract
from common.outputs import ForecastOutput
from facts.money import burn_per_hour
from report.alerts import alerts_json, alerts_table
from report.escape import code, text
from report.forecast import capacity_lines, forecast_json, forecast_table
from report.groups import group_changes
from report.parse import Preview, ResourceChange, ResourceCost

MARKER = "<!-- trainstack-preview-report -->"  # the workflow finds its own comment by this line
JSON_SCHEMA = "trainstack.preview-report/v1"
OP_ORDER = ("create", "update", "replace", "delete", "read", "import")
_OP_SIGN = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "read": ">", "import": "="}
_MAX_CELL = 80  # characters of one value in a table cell; the JSON output keeps the whole text
_MAX_PROPS = 12  # changed properties listed per resource (a create lists all its inputs)
_LEVELS = ("mandatory", "advisory", "remediate")


@dataclass(frozen=True)
class CostTotals:
    """One side of the change, summed over the stack's billable resources."""

    hourly: float  # USD/h, sum of `cost_per_hour`
    storage_monthly: float  # USD/month, sum of `storage_cost_per_month`
    run_hours: float | None  # the forecast's hours, else the longest training.max_run_hours
    per_run: float | None  # USD for one run; None when no run length is known
    complete: bool  # False when some resource's cost was unknown at preview (totals are a floor)
    per_hour: float = 0.0  # USD/h: compute plus storage / 730, the stack's one hourly price
    run_basis: str = "max_run_hours"  # "forecast" when per_run is the forecast's hours at per_hour


@dataclass(frozen=True)
class StackReport:
    """A stack's preview with the costs before (stack state) and after (preview steps)."""

    stack: str
    preview: Preview
    before: tuple[ResourceCost, ...]
    before_totals: CostTotals
    after_totals: CostTotals
    before_forecast: ForecastOutput | None = None  # the stack output `forecast` in the state
    before_alerts: Mapping[str, Any] | None = None  # the stack output `alerts` in the state

    @property
    def mandatory(self) -> int:
        return sum(v.level == "mandatory" for v in self.preview.violations)


def totals(
    costs: Sequence[ResourceCost], config_run_hours: float | None, forecast: ForecastOutput | None = None
) -> CostTotals:
    """Sum a side's costs. The hourly price is compute plus storage/730 (`facts.money.burn_per_hour`, the
    rule stackconfig/pricing.py and the stack output `cost_per_hour` use). One run is the stack's one run cost
    (the output `cost_per_run`): the forecast's hours at that price when the side has a forecast
    (training.model), else each resource's burn for its own `training.max_run_hours` (resources without
    one, volumes, for the longest run; the stack config's when no resource declares one)."""
    hourly = sum(c.cost_per_hour or 0.0 for c in costs)
    storage = sum(c.storage_cost_per_month or 0.0 for c in costs)
    hours_fc = _forecast_hours(forecast)
    per_run: float | None = 0.0
    if hours_fc is not None:
        longest: float | None = hours_fc
        per_run, basis = burn_per_hour(hourly, storage) * hours_fc, "forecast"
    else:
        own = [c.run_hours for c in costs if c.run_hours is not None]
        longest, basis = (max(own) if own else config_run_hours), "max_run_hours"
        for c in costs:
            hours = c.run_hours if c.run_hours is not None else longest
            if hours is None or per_run is None:
                per_run = None
                continue
            per_run += burn_per_hour(c.cost_per_hour or 0.0, c.storage_cost_per_month or 0.0) * hours
    return CostTotals(
        hourly=round(hourly, 4),
        storage_monthly=round(storage, 4),
        run_hours=longest,
        per_run=None if per_run is None else round(per_run, 2),
        complete=all(c.cost_per_hour is not None and c.storage_cost_per_month is not None for c in costs),
        per_hour=round(burn_per_hour(hourly, storage), 2),
        run_basis=basis,
    )


def _forecast_hours(forecast: ForecastOutput | None) -> float | None:
    """The forecast's hours to the precision of its run cost (the output rounds `hours` to 0.01 h, which
    at prod's $255/h is $1.28): run_cost_usd / usd_per_hour, else `hours`; None without a forecast."""
    if forecast is None:
        return None
    if forecast.usd_per_hour:
        return forecast.run_cost_usd / forecast.usd_per_hour
    return forecast.hours


def build(
    stack: str,
    preview: Preview,
    before: Sequence[ResourceCost],
    before_forecast: ForecastOutput | None = None,
    before_alerts: Mapping[str, Any] | None = None,
) -> StackReport:
    """The report; a resource in the state that the preview has no step for is unchanged, so its cost
    carries over (the plain `--json` form leaves some `same` steps out)."""
    stepped = {c.urn for c in preview.changes}
    kept = [c for c in before if c.urn not in stepped]
    after = tuple(sorted([*preview.after, *kept], key=lambda c: c.urn))
    preview = replace(preview, after=after)
    return StackReport(
        stack=stack,
        preview=preview,
        before=tuple(before),
        before_totals=totals(before, preview.config_run_hours, before_forecast),
        after_totals=totals(after, preview.config_run_hours, preview.forecast),
        before_forecast=before_forecast,
        before_alerts=before_alerts,
    )


# --- text helpers ----------------------------------------------------------------------------------


def cell(value: str, limit: int = _MAX_CELL) -> str:
    """Text made safe for one Markdown table cell (report/escape.py): inert, pipes escaped, cut."""
    return text(value, limit)


def usd(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    text = f"${abs(value):,.2f}"
    if signed:
        return ("+" if value >= 0 else "-") + text
    return ("-" if value < 0 else "") + text


def percent(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    if before == 0:
        return "new" if after else "0%"
    return f"{(after - before) / before * 100:+.1f}%"


def op_counts(changes: Iterable[ResourceChange]) -> str:
    counts = Counter(c.op for c in changes if c.op != "same")
    ordered = sorted(counts, key=lambda op: (OP_ORDER.index(op) if op in OP_ORDER else 99, op))
    return ", ".join(f"{counts[op]} to {op}" for op in ordered) or "no changes"


def short_type(type_: str) -> str:
    """`pulumi-python:dynamic/runpod:Pod` -> `runpod:Pod` (the token docs/ARCHITECTURE.md uses)."""
    return contract.short_type(type_)


# --- Markdown --------------------------------------------------------------------------------------


def _changes_table(report: StackReport) -> list[str]:
    changed = [c for c in report.preview.changes if c.op != "same"]
    unchanged = len(report.preview.changes) - len(changed)
    head = f"**Changes:** {op_counts(changed)}" + (f" ({unchanged} unchanged)" if unchanged else "")
    if not changed:
        return [head]
    rows = [head, "", "| op | resource | type | changed properties |", "|---|---|---|---|"]
    ordered = sorted(changed, key=lambda c: (OP_ORDER.index(c.op) if c.op in OP_ORDER else 99, c.urn))
    # Resources that differ only in their index (search-pod-0..3) are one row: "4 x search-pod-[0-3]".
    for group in group_changes(ordered):
        c = group.first
        props_first = sorted(group.changes, key=lambda p: review_rank(p.path))
        shown = [_property(p.path, p.before, p.after, p.forces_replace) for p in props_first[:_MAX_PROPS]]
        if len(props_first) > _MAX_PROPS:
            shown.append(f"… and {len(props_first) - _MAX_PROPS} more")
        props = "<br>".join(shown)
        if not props and c.op in ("update", "replace"):
            props = "(the provider reports a change; no input differs)"
        many = f"{group.count} × {code(group.label)}"  # noqa: RUF001 (the multiplication sign, on purpose)
        name = code(group.label) if group.count == 1 else many
        rows.append(f"| {_OP_SIGN.get(c.op, '')} {c.op} | {name} | {cell(short_type(c.type))} | {props} |")
    return rows


# What a reviewer reads first in a row: what is rented and what it costs, then where and from what image; the
# stock read at preview (`availability.*`, a dozen entries of its own) last, since the capacity line under
# the forecast says it (issue #68: a new pod's row led with twelve stock entries and hid the rest).
REVIEW_FIRST = (
    "gpu_type_id", "gpu_count", "gpu_count_per_pod", "pod_count", "capacity", "cloud", "bid_per_gpu",
    "cost_per_hour", "storage_cost_per_month", "desired_status", "data_center_ids", "data_center_id",
    "size_gb", "volume_type", "image", "volume_id", "container_disk_gb", "training", "bucket_name",
)  # fmt: skip
REVIEW_LAST = ("availability",)


def review_rank(path: str) -> tuple[int, int, str]:
    """A changed property's place in its row: REVIEW_FIRST in order, then the rest, `availability` last."""
    root = re.split(r"[.\[]", path, maxsplit=1)[0]
    if root in REVIEW_LAST:
        return (2, 0, path)
    if root in REVIEW_FIRST:
        return (0, REVIEW_FIRST.index(root), path)
    return (1, 0, path)


def _property(path: str, before: str | None, after: str | None, forces_replace: bool) -> str:
    name, limit = code(path), _MAX_CELL
    if before is None:
        shown = f"{name}: {cell(str(after), limit)}"
    elif after is None:
        shown = f"{name}: {cell(before, limit)} → (removed)"
    else:
        shown = f"{name}: {cell(before, limit)} → {cell(after, limit)}"
    return shown + (" **(forces replace)**" if forces_replace else "")


def _cost_table(report: StackReport) -> list[str]:
    b, a = report.before_totals, report.after_totals
    hours = a.run_hours or b.run_hours
    run_label = "per run"
    if hours is not None:
        basis = "forecast" if "forecast" in (a.run_basis, b.run_basis) else "max_run_hours"
        run_label = f"per run ({basis} {hours:,.1f} h)" if basis == "forecast" else f"per run ({hours:g} h)"
    rows = [
        "**Cost:**",
        "",
        "| | before | after | delta | change |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, before, after in (
        ("compute, $/hour", b.hourly, a.hourly),
        (run_label, b.per_run, a.per_run),
        ("storage, $/month", b.storage_monthly, a.storage_monthly),
    ):
        delta = None if before is None or after is None else after - before
        change = percent(before, after)
        rows.append(f"| {label} | {usd(before)} | {usd(after)} | {usd(delta, signed=True)} | {change} |")
    if not a.complete or not b.complete:
        rows += ["", "Some costs are unknown until apply: the totals above leave them out."]
    return rows


def _policy_section(report: StackReport) -> list[str]:
    violations = report.preview.violations
    by_level = Counter(v.level for v in violations)
    summary = ", ".join(f"{by_level[lvl]} {lvl}" for lvl in _LEVELS if by_level[lvl]) or "none"
    icon = "❌" if by_level["mandatory"] else ("⚠️" if violations else "✅")
    rows = [f"**Policy violations:** {icon} {summary}"]
    if violations:
        rows += ["", "| level | policy | resource | message |", "|---|---|---|---|"]
        for v in sorted(violations, key=lambda v: (_level_rank(v.level), v.policy, v.resource or "")):
            rows.append(
                f"| {cell(v.level)} | {code(v.policy)} | {cell(v.resource or '(stack)')} | "
                f"{cell(v.message, _MAX_CELL * 6)} |"
            )
    return rows


def _level_rank(level: str) -> int:
    return _LEVELS.index(level) if level in _LEVELS else len(_LEVELS)


def _pie(report: StackReport) -> list[str]:
    """Mermaid pie of each resource's share of the hourly burn after the change (storage as /730)."""
    slices = [
        (c.name, round(burn_per_hour(c.cost_per_hour or 0.0, c.storage_cost_per_month or 0.0), 2))
        for c in report.preview.after
    ]
    slices = sorted(((n, v) for n, v in slices if v > 0), key=lambda s: (-s[1], s[0]))
    if not slices:
        return []
    lines = ["```mermaid", f"pie showData title {_mermaid(report.stack)}: USD per hour by resource, after"]
    lines += [f'    "{_mermaid(name)}" : {value:.2f}' for name, value in slices]
    return [*lines, "```"]


def _mermaid(name: str) -> str:
    """A label inside a Mermaid block: one line, no quote, no backtick that could close the fence."""
    return re.sub(r'["`\x00-\x1f\x7f-\x9f#;{}<>]', "", name)[:_MAX_CELL]


def render_stack(report: StackReport) -> str:
    parts = [f"### Stack {code(report.stack)}", ""]
    if report.preview.failed and not report.mandatory:
        parts += [
            "**The preview failed:** the engine's messages below say why; the figures are incomplete.",
            "",
        ]
    parts += [*_changes_table(report), "", *_cost_table(report)]
    forecast = forecast_table(report.before_forecast, report.preview.forecast)
    parts += ["", *forecast] if forecast else []
    stock = capacity_lines(report.preview.changes)  # beside the forecast's "cheapest feasible" line
    parts += ["", *(cell(line, _MAX_CELL * 4) for line in stock)] if stock else []
    alerts = alerts_table(report.before_alerts, report.preview.alerts)
    parts += ["", *alerts] if alerts else []
    parts += ["", *_policy_section(report)]
    if report.preview.diagnostics:
        parts += ["", "**Engine messages:**", ""]
        parts += [f"- {cell(d, _MAX_CELL * 4)}" for d in report.preview.diagnostics]
    pie = _pie(report)
    if pie:
        parts += ["", *pie]
    return "\n".join(parts)


def _summary_row(r: StackReport) -> str:
    b, a = r.before_totals, r.after_totals
    hourly = f"{usd(b.per_hour)} → {usd(a.per_hour)} ({usd(a.per_hour - b.per_hour, signed=True)})"
    run = f"{usd(b.per_run)} → {usd(a.per_run)}"
    levels = Counter(v.level for v in r.preview.violations)
    policy = ", ".join(f"{levels[lvl]} {lvl}" for lvl in _LEVELS if levels[lvl]) or "none"
    icon = "❌" if levels["mandatory"] else ("⚠️" if r.preview.violations else "✅")
    if r.preview.failed and not levels["mandatory"]:
        icon, policy = "❌", f"{policy}; preview failed"
    return f"| {code(r.stack)} | {op_counts(r.preview.changes)} | {hourly} | {run} | {icon} {policy} |"


def render_markdown(reports: Sequence[StackReport]) -> str:
    """The whole comment: a marker line, a one-row-per-stack summary, then each stack in full."""
    lines = [
        MARKER,
        "## trainstack preview",
        "",
        "| stack | changes | $/hour | per run | policy violations |",
        "|---|---|---|---|---|",
        *(_summary_row(r) for r in reports),
    ]
    for r in reports:
        lines += ["", render_stack(r)]
    return "\n".join(lines) + "\n"


# --- JSON ------------------------------------------------------------------------------------------


def _change_json(change: ResourceChange) -> dict[str, Any]:
    """A change as a plain dict; its stock read is summed up once per stack under `capacity` instead."""
    out = asdict(change)
    out.pop("availability", None)
    return out


def to_json(reports: Sequence[StackReport]) -> dict[str, Any]:
    """The same data as the Markdown, for tools: records as plain dicts, deltas spelled out."""
    stacks = []
    for r in reports:
        b, a = r.before_totals, r.after_totals
        stacks.append(
            {
                "stack": r.stack,
                "changes": [_change_json(c) for c in r.preview.changes],
                "cost": {
                    "before": asdict(b),
                    "after": asdict(a),
                    "delta_hourly": round(a.hourly - b.hourly, 4),
                    "delta_storage_monthly": round(a.storage_monthly - b.storage_monthly, 4),
                    "delta_per_run": None
                    if a.per_run is None or b.per_run is None
                    else round(a.per_run - b.per_run, 2),
                    "resources_before": [asdict(c) for c in r.before],
                    "resources_after": [asdict(c) for c in r.preview.after],
                },
                "forecast": forecast_json(r.before_forecast, r.preview.forecast),
                "alerts": alerts_json(r.before_alerts, r.preview.alerts),
                "capacity": capacity_lines(r.preview.changes),
                "violations": [asdict(v) for v in r.preview.violations],
                "mandatory_violations": r.mandatory,
                "diagnostics": list(r.preview.diagnostics),
                "preview_failed": r.preview.failed,
            }
        )
    return {"schema": JSON_SCHEMA, "stacks": stacks}
