"""The team budget's headline in the preview comment: month-to-date spend + the PR's runs against the budget.

Pure: `report/team_budget.py` computes the figures (RunPod billing, the report's run costs, the team file, who
set the override label) and calls `budget_headline`; `with_headline` puts it under the report's title, so the
report's own rendering (render.py) is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from report import escape


@dataclass(frozen=True)
class BudgetFigures:
    """What the headline states; every amount in USD."""

    month: str  # "2026-12"
    budget: float
    spent: float  # RunPod billing, the whole account, since the month began
    runs: Sequence[tuple[str, float | None]]  # (stack, forecast run cost after the change; None unknown)
    label: str
    override_by: str | None  # the login that set the label last, or None when it is not set
    override_allowed: bool  # override_by is one of the team file's `allowed`

    @property
    def forecast(self) -> float:
        return sum(cost for _, cost in self.runs if cost is not None)

    @property
    def total(self) -> float:
        return self.spent + self.forecast

    @property
    def over(self) -> bool:
        return self.total > self.budget

    @property
    def passed(self) -> bool:
        return not self.over or (self.override_by is not None and self.override_allowed)


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _runs(runs: Sequence[tuple[str, float | None]]) -> str:
    if not runs:
        return "no stack's run changes"
    parts = [f"{escape.text(s)} {_usd(c) if c is not None else 'n/a (not counted)'}" for s, c in runs]
    return ", ".join(parts)


def budget_headline(f: BudgetFigures) -> str:
    """One paragraph: the sum, the verdict, and the override with who set it."""
    sums = (
        f"**Team budget {f.month}:** {_usd(f.spent)} spent this month + {_usd(f.forecast)} forecast for the "
        f"runs this pull request changes ({_runs(f.runs)}) = **{_usd(f.total)}** of {_usd(f.budget)}"
    )
    label = escape.code(f.label)
    who = escape.text(f"@{f.override_by}") if f.override_by else ""
    if not f.over:
        verdict = f"within budget ({_usd(f.budget - f.total)} left)."
    elif f.passed:
        verdict = f"over budget by {_usd(f.total - f.budget)}; **overridden** by {who} (label {label})."
    elif f.override_by:
        verdict = (
            f"**over budget by {_usd(f.total - f.budget)}**; label {label} was set by {who}, who may not "
            "override (stacks/team.yaml), so the `team-budget` check fails."
        )
    else:
        verdict = (
            f"**over budget by {_usd(f.total - f.budget)}**: the `team-budget` check fails (label {label}, "
            "set by someone stacks/team.yaml allows, overrides it)."
        )
    return f"{sums}: {verdict}"


def with_headline(markdown: str, headline: str) -> str:
    """The report with `headline` as its first paragraph under the title (`## trainstack preview`)."""
    lines = markdown.split("\n")
    title = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    if title is None:
        return f"{headline}\n\n{markdown}"
    return "\n".join([*lines[: title + 1], "", headline, *lines[title + 1 :]])
