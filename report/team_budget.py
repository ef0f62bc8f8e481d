"""`scripts/team-budget`: the team budget check of a pull request (docs/TEAM-BUDGET.md).

Month-to-date spend of the whole RunPod account (REST v2 billing: pods, clusters, network volumes, from the
first of the month, UTC) plus the forecast run cost of every stack the pull request changes (the preview
report's JSON: `cost.after.per_run` of each stack with a change other than `same`), against
`trainstack:team.monthly_budget_usd` (stacks/team.yaml). It prints one line with the figures, puts the
headline into the report's Markdown (report/budget.py) and exits:

    0  within the budget, or over it with the override label set by someone the team file allows
    1  over the budget (the `team-budget` check fails)
    2  could not run: no report, no team file, or RunPod billing unreadable

Billing is a read: the preview's Read Only key is enough.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import TrainstackError
from report.budget import BudgetFigures, budget_headline, with_headline
from stackconfig.team import TEAM_FILE, TeamConfig, TeamConfigError, load_team

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

EXIT_OK, EXIT_OVER, EXIT_FAILED = 0, 1, 2
BILLING = ("/v2/billing/pods", "/v2/billing/clusters", "/v2/billing/network-volumes")
LABELS_ENV = "TEAM_BUDGET_LABELS"  # {"<label>": "<login that set it last>"}, from the workflow


class BudgetError(RuntimeError):
    """The check cannot be computed; the message says which input is missing or unreadable."""


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_to_date(client: RunPodClient, now: datetime) -> float:
    """USD billed to the account since the month began: every pod, cluster and volume, ours or not."""
    query = {"startTime": month_start(now).strftime("%Y-%m-%dT%H:%M:%SZ"), "bucketSize": "month"}
    total = 0.0
    for path in BILLING:
        body = client.request("GET", path, query=query)
        records = body.get("records") if isinstance(body, dict) else None
        if not isinstance(records, list):
            raise BudgetError(f"RunPod's billing answer for {path} has no records list")
        total += sum(float(r.get("totalAmount") or 0) for r in records if isinstance(r, dict))
    return total


def changed_runs(report: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """(stack, forecast run cost after the change) of each stack the preview changes."""
    runs = []
    for stack in report.get("stacks") or []:
        if any(c.get("op") not in ("same", "read") for c in stack.get("changes") or []):
            per_run = ((stack.get("cost") or {}).get("after") or {}).get("per_run")
            runs.append((str(stack["stack"]), None if per_run is None else float(per_run)))
    return runs


def figures(
    team: TeamConfig,
    spent: float,
    runs: Sequence[tuple[str, float | None]],
    labels: Mapping[str, str],
    now: datetime,
) -> BudgetFigures:
    """The check's figures and verdict; `labels` maps each label on the PR to who set it last."""
    by = labels.get(team.override.label)
    return BudgetFigures(
        month=now.astimezone(UTC).strftime("%Y-%m"),
        budget=team.monthly_budget_usd,
        spent=round(spent, 2),
        runs=tuple(runs),
        label=team.override.label,
        override_by=by,
        override_allowed=by is not None and by in team.override.allowed,
    )


def summary_line(f: BudgetFigures) -> str:
    runs = ", ".join(f"{s} {'n/a' if c is None else f'${c:,.2f}'}" for s, c in f.runs) or "none"
    verdict = "within budget" if not f.over else "OVER"
    if f.over and f.passed:
        verdict = f"over, overridden by {f.override_by} (label {f.label})"
    return (
        f"team-budget {f.month}: spent ${f.spent:,.2f} + forecast ${f.forecast:,.2f} (runs changed: {runs}) "
        f"= ${f.total:,.2f} of ${f.budget:,.2f}: {verdict}"
    )


def _labels(raw: str | None) -> dict[str, str]:
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        raise BudgetError(f"{LABELS_ENV} is not JSON") from None
    if not isinstance(parsed, dict):
        raise BudgetError(f"{LABELS_ENV} must map label -> login")
    return {str(k): str(v) for k, v in parsed.items()}


def run(args: argparse.Namespace, client: RunPodClient | None = None, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    try:
        team = load_team(args.team_file)
        report = json.loads(Path(args.report_json).read_text(encoding="utf-8"))
        if client is None:
            from providers.runpod.client import RunPodClient

            client = RunPodClient.from_env()
        with client:
            spent = month_to_date(client, now)
        f = figures(team, spent, changed_runs(report), _labels(os.environ.get(LABELS_ENV)), now)
    except (OSError, ValueError, TeamConfigError, BudgetError) as exc:
        print(f"team-budget: cannot check: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except TrainstackError as exc:  # RunPod errors: messages are ours, without the key (providers/errors.py)
        print(f"team-budget: cannot read RunPod billing: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(summary_line(f))
    if args.markdown:
        path = Path(args.markdown)
        path.write_text(with_headline(path.read_text(encoding="utf-8"), budget_headline(f)), encoding="utf-8")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(_json(f), indent=2) + "\n", encoding="utf-8")
    return EXIT_OK if f.passed else EXIT_OVER


def _json(f: BudgetFigures) -> dict[str, Any]:
    return {
        "month": f.month,
        "budget": f.budget,
        "spent": f.spent,
        "forecast": round(f.forecast, 2),
        "total": round(f.total, 2),
        "runs": [{"stack": s, "per_run": c} for s, c in f.runs],
        "over": f.over,
        "override": {"label": f.label, "set_by": f.override_by, "allowed": f.override_allowed},
        "passed": f.passed,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/team-budget", description=__doc__.split("\n\n")[0])
    p.add_argument("report_json", help="scripts/preview-report --json-out's file")
    p.add_argument("--markdown", help="the report's Markdown: the headline is inserted under its title")
    p.add_argument("--json-out", help="write the figures and the verdict as JSON here")
    p.add_argument("--team-file", type=Path, default=TEAM_FILE, help="default: stacks/team.yaml")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
