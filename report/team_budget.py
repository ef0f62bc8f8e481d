"""`scripts/team-budget`: the team budget check of a pull request (docs/TEAM-BUDGET.md).

Month-to-date spend of the whole RunPod account (REST v2 billing: pods, clusters, network volumes, from the
first of the month, UTC) plus the forecast run cost of every stack the pull request changes (the preview
report's JSON: `cost.after.per_run` of each stack with a change other than `same`), against
`trainstack:team.monthly_budget_usd` (stacks/team.yaml). It prints one line with the figures, puts the
headline into the report's Markdown (report/budget.py) and exits:

    0  within the budget, or over it with the override label set by someone the team file allows
    1  over the budget (the `team-budget` check fails)
    2  could not run: no report, no team file, a run cost that is not a finite amount >= 0, a --markdown
       file that is not there or a --json-out folder that is not, or RunPod billing unreadable (one line
       naming the input and the fix)

Billing is a read: the preview's Read Only key is enough.
"""

from __future__ import annotations

import argparse
import json
import math
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


def changed_runs(report: object) -> list[tuple[str, float | None]]:
    """(stack, forecast run cost after the change) of each stack the preview changes. BudgetError names the
    first entry that is not what `scripts/preview-report --json-out` writes: a run cost that is NaN, infinite
    or negative would lower the total another stack's run adds (a negative one offsets it)."""
    fix = "pass the file scripts/preview-report --json-out wrote"
    if not isinstance(report, Mapping):
        raise BudgetError(f"the report is a JSON {type(report).__name__}, not an object; {fix}")
    stacks = report.get("stacks") or []
    if not isinstance(stacks, list):
        raise BudgetError(f"the report's `stacks` is not a list; {fix}")
    runs = []
    for i, stack in enumerate(stacks):
        name = stack.get("stack") if isinstance(stack, Mapping) else None
        if not isinstance(name, str) or not name:
            raise BudgetError(f"the report's stacks[{i}] has no `stack` name; {fix}")
        changes = stack.get("changes") or []
        if not isinstance(changes, list) or not all(isinstance(c, Mapping) for c in changes):
            raise BudgetError(f"the report's stack {name!r}: `changes` is not a list of objects; {fix}")
        if any(c.get("op") not in ("same", "read") for c in changes):
            per_run = ((stack.get("cost") or {}).get("after") or {}).get("per_run")
            runs.append((name, None if per_run is None else _run_cost(name, per_run)))
    return runs


def _run_cost(stack: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise BudgetError(
            f"the report's stack {stack!r}: cost.after.per_run is {value!r}, not a finite amount >= 0 (USD); "
            "the report was not written by scripts/preview-report: run it again"
        )
    return float(value)


def figures(
    team: TeamConfig,
    spent: float,
    runs: Sequence[tuple[str, float | None]],
    labels: Mapping[str, str],
    now: datetime,
) -> BudgetFigures:
    """The check's figures and verdict; `labels` maps each label on the PR to who set it last."""
    # GitHub compares label names and logins without regard to case (a label's name is unique that way).
    wanted = team.override.label.casefold()
    by = next((login for label, login in labels.items() if label.casefold() == wanted), None)
    return BudgetFigures(
        month=now.astimezone(UTC).strftime("%Y-%m"),
        budget=team.monthly_budget_usd,
        spent=round(spent, 2),
        runs=tuple(runs),
        label=team.override.label,
        override_by=by,
        override_allowed=team.override.allows(by),
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


def _report(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BudgetError(
            f"{path}: cannot be read ({exc.strerror}); pass scripts/preview-report --json-out's file"
        ) from None
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested past Python's stack
        why = exc if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise BudgetError(
            f"{path}: is not a JSON report ({why}); pass scripts/preview-report --json-out's file"
        ) from None


def _check_outputs(markdown: str | None, json_out: str | None) -> None:
    """Where the check writes must be there before it computes: a verdict is never lost to a bad path."""
    if markdown and not Path(markdown).is_file():
        raise BudgetError(
            f"--markdown {markdown}: no such file; pass the report scripts/preview-report --out wrote"
        )
    if json_out and not Path(json_out).resolve().parent.is_dir():
        raise BudgetError(f"--json-out {json_out}: its folder does not exist; create it or write elsewhere")


def run(args: argparse.Namespace, client: RunPodClient | None = None, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    try:
        _check_outputs(args.markdown, args.json_out)
        team = load_team(args.team_file)
        runs = changed_runs(_report(Path(args.report_json)))
        labels = _labels(os.environ.get(LABELS_ENV))
        if client is None:
            from providers.runpod.client import RunPodClient

            client = RunPodClient.from_env()
        with client:
            spent = month_to_date(client, now)
        f = figures(team, spent, runs, labels, now)
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
