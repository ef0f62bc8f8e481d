"""The report's alerts section: the thresholds a change moves (trainstack:alerts, before -> after). Pure.

Both sides are the stack output `alerts` (train/monitor/rules.py `AlertRules`, in seconds and ratios as the
aggregator applies them): before from the state, after from the preview. Only changed rules are listed, so
a PR that lowers the utilisation floor shows one row; an unchanged config shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from report.escape import code, text
from train.monitor.rules import THRESHOLDS

# How each field reads in the report (the config's own units: percent, minutes, microseconds): label,
# factor from the rule's unit back to the config's, unit; from the one table (train/monitor/rules.py).
_SHOWN: dict[str, tuple[str, float, str]] = {
    t.field: (t.label, float(1 / t.factor), t.unit) for t in THRESHOLDS if t.label is not None
}


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key not in _SHOWN or isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    _, scale, unit = _SHOWN[key]
    shown = value * scale
    # 4 significant digits, never an exponent: a 10,000 USD cap read "1e+04 USD"
    return f"{shown:,.0f} {unit}" if abs(shown) >= 1000 else f"{shown:.4g} {unit}"


def _changed(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> list[tuple[str, str, str, str]]:
    """(label, key, before, after) for every threshold that differs; a side without alerts shows '-'."""
    b, a = before or {}, after or {}
    if not b and not a:
        return []
    keys = [k for k in _SHOWN if b.get(k) != a.get(k)]
    keys += sorted(str(k) for k in set(a) | set(b) if k not in _SHOWN and b.get(k) != a.get(k))
    return [(_SHOWN.get(k, (k, 1, ""))[0], k, _fmt(k, b.get(k)), _fmt(k, a.get(k))) for k in keys]


def alert_changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> list[tuple[str, str, str]]:
    """(rule, before, after) for every threshold that differs, as plain text (the JSON output)."""
    return [(f"{label} (`{key}`)", b, a) for label, key, b, a in _changed(before, after)]


def alerts_table(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """Markdown lines of the section; empty when no threshold changes."""
    rows = _changed(before, after)
    if not rows:
        return []
    lines = [
        "**Alert rules** (trainstack:alerts; docs/MONITORING.md):",
        "",
        "| rule | before | after |",
        "|---|---|---|",
    ]
    # The keys and values come from the state and the preview: shown inert (report/escape.py), never raw.
    return lines + [f"| {text(label)} ({code(key)}) | {text(b)} | {text(a)} |" for label, key, b, a in rows]


def alerts_json(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[dict[str, str]]:
    return [{"rule": r, "before": b, "after": a} for r, b, a in alert_changes(before, after)]
