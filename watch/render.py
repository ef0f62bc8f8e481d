"""The terminal view of a `WatchSnapshot`: a rich table, a row per node, then alerts and the money line.

Every string in it came from RunPod, a node or the state (a pod id, an alert's text, a pod's log lines): each
is a `Text` with control characters removed (common/terminal.py), so no ESC sequence sets the title, clears
the screen or makes a link, and rich never reads it as markup."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from common.terminal import plain
from stackview.snapshot import NodeView, WatchSnapshot

UNOWNED_SHOWN = 5  # lines of unowned resources in the view; `scripts/reconcile` prints every one


def _t(text: object, style: str = "") -> Text:
    """Literal text for the terminal: controls removed, never markup."""
    return Text(plain(text), style=style)


def _f(value: float | None, fmt: str, dash: str = "-") -> str:
    return dash if value is None else format(value, fmt)


def _row(n: NodeView) -> list[RenderableType]:
    if n.exited:
        style = {"failed": "bold red", "finished": "green"}.get(n.exited, "yellow")
        state = Text(f"EXITED ({n.exited})", style=style)
    elif n.reachable is False:
        state = Text("UNREACHABLE", style="bold red")
    elif n.reachable is None:
        state = Text("unknown", style="dim")
    elif n.alerts:
        state = _t("\n".join(n.alerts), style="yellow")  # one a line: a name is never cut
    else:
        state = Text("ok", style="green")
    steps_per_s = None if not n.step_time_s else 1 / n.step_time_s
    return [
        _t(n.rank),
        _t(n.pod_id),
        _f(n.gpu_util_mean, ".0%"),
        _f(n.gpu_mem_max_gb, ".1f"),
        _f(n.gpu_temp_max_c, ".0f"),
        _f(n.busbw_gb_per_s, ".1f"),
        _f(n.nvme_p99_us, ".0f"),
        _f(n.step, ".0f"),
        _f(steps_per_s, ".2f"),
        state,
    ]


COLUMNS = (
    ("rank", "right"),
    ("pod", "left"),
    ("GPU util", "right"),
    ("mem GB", "right"),
    ("temp C", "right"),
    ("busbw GB/s", "right"),
    ("NVMe p99 us", "right"),
    ("step", "right"),
    ("step/s", "right"),
    ("health / alerts", "left"),
)


def _width(cell: RenderableType) -> int:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((len(line) for line in text.splitlines()), default=0)


def render(s: WatchSnapshot) -> RenderableType:
    # At 80 columns (issue #68: pod "e19a…", alert "nvme…") every cell keeps its whole width: one space
    # between columns, no borders, headers wrapped at their words ("busbw" over "GB/s"), one alert a line.
    table = Table(
        title=_t(f"trainstack {s.stack}"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        show_edge=False,
        padding=0,
    )  # fmt: skip
    rows = [_row(n) for n in s.nodes]
    for i, (name, justify) in enumerate(COLUMNS):
        widest = max([_width(r[i]) for r in rows] + [max(len(word) for word in name.split())])
        last = i == len(COLUMNS) - 1  # the alerts take what is left; the rest are as wide as their cells
        table.add_column(name, justify=justify, min_width=widest, max_width=None if last else widest)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    parts: list[RenderableType] = [table]
    for n in s.nodes:
        if n.note and (n.reachable is False or n.exited):
            style = "green" if n.exited == "finished" else "yellow" if n.exited == "stopped" else "red"
            parts.append(_t(f"rank {n.rank} ({n.pod_id}): {n.note}", style=style))
        for line in n.log_tail:
            parts.append(_t(f"  rank {n.rank} {n.log_source or 'log'} | {line}", style="dim"))
    for a in s.firing:
        style = "bold red" if a.get("severity") == "critical" else "yellow"
        parts.append(
            _t(f"{str(a.get('severity', '')).upper()} {a.get('rule')}: {a.get('summary')}", style=style)
        )
    m = s.money
    spent = "?" if m.spent_usd is None else f"${m.spent_usd:,.2f}"  # dollars as the rate is ("1.31 USD" was)
    money = f"money: ${m.cost_per_hour_usd:,.2f}/h; spent {spent} ({m.source})"
    if m.projected_usd is not None:
        money += f"; projected ${m.projected_usd:,.0f}"
    if m.forecast_usd is not None:
        money += f"; forecast ${m.forecast_usd:,.0f}"
    if m.budget_usd:
        money += f"; budget ${m.budget_usd:,.0f}"
    parts.append(_t(money, style="bold"))
    if s.ledger:
        parts.append(_t(s.ledger))
    for line in s.slurm_queue:  # squeue on the controller: job id, name, state, time, nodes, reason
        parts.append(_t(f"slurm: {line}"))
    if s.unowned:
        per_hour = sum(float(u.get("usd_per_hour") or 0) for u in s.unowned)
        head = (
            f"billed, owned by no stack: {len(s.unowned)} resources, ${per_hour:,.2f}/h (scripts/reconcile)"
        )
        parts.append(_t(head, style="bold yellow"))
        parts.extend(_t(f"  {u.get('line')}", style="yellow") for u in s.unowned[:UNOWNED_SHOWN])
        hidden = len(s.unowned) - UNOWNED_SHOWN
        if hidden > 0:
            parts.append(_t(f"  ... and {hidden} more: scripts/reconcile lists them all", style="yellow"))
    if s.aggregator_age_s is not None:
        parts.append(Text(f"aggregator's last round {s.aggregator_age_s:.0f} s ago", style="dim"))
    for p in s.problems:
        parts.append(_t(p, style="red"))
    return Group(*parts)
