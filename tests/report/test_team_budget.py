"""Issue #45: the team budget check against the local RunPod (in process): month-to-date spend of the whole
account + the forecast run cost of the stacks a pull request changes, over budget fails, the override label
passes it only when an allowed person set it, and the report's headline says all of it."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.config import DEFAULT_API_KEY, DEFAULT_READ_ONLY_KEY
from harness.inprocess import InProcessRunPod, in_process
from report import team_budget
from report.budget import BudgetFigures, budget_headline, with_headline
from stackconfig.team import TEAM_FILE, TeamConfigError, load_team
from tests.emulator.conftest import pod_body


def next_month(now: datetime) -> datetime:
    first = team_budget.month_start(now)
    return first.replace(month=first.month % 12 + 1, year=first.year + (first.month == 12))


@pytest.fixture
def rp(tmp_path: Path) -> Iterator[InProcessRunPod]:
    """A local RunPod whose clock is 10 days into a month, so any test's hours stay in it."""
    with in_process(tmp_path / "rp") as server:
        now = datetime.fromtimestamp(server.world.now(), UTC)
        server.world.clock.advance((next_month(now) - now).total_seconds() + 10 * 86400)
        yield server


def team_file(tmp_path: Path, budget: float) -> Path:
    path = tmp_path / "team.yaml"
    team = {"monthly_budget_usd": budget, "override": {"label": "budget-ok", "allowed": ["alice"]}}
    path.write_text(json.dumps({"config": {"trainstack:team": team}}))  # JSON is YAML
    return path


def report(tmp_path: Path) -> Path:
    """dev and prod change (prod's run cost is unknown), search only stays the same."""

    def stack(name: str, op: str, per_run: float | None) -> dict[str, Any]:
        return {"stack": name, "changes": [{"op": op}], "cost": {"after": {"per_run": per_run}}}

    body = {
        "stacks": [
            stack("dev", "update", 300.0),
            stack("search", "same", 9999.0),
            stack("prod", "create", None),
        ]
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(body))
    (tmp_path / "report.md").write_text(
        "<!-- trainstack-preview-report -->\n## trainstack preview\n\n| stack |\n"
    )
    return path


def bill(rp: InProcessRunPod, hours: float) -> float:
    """Two pods, one ours and one not (the budget is the account's), running `hours`; what they cost."""
    with httpx.Client(base_url=rp.base_url, transport=rp.transport) as api:
        api.headers["Authorization"] = f"Bearer {DEFAULT_API_KEY}"
        costs = [api.post("/v2/pods", json=pod_body(n)).json()["cost"] for n in ("trainstack-dev-pod-0", "x")]
    rp.world.clock.advance(hours * 3600)
    return float(sum(costs)) * hours


def check(rp: InProcessRunPod, tmp_path: Path, budget: float, labels: dict[str, str] | None = None) -> int:
    args = argparse.Namespace(
        report_json=str(report(tmp_path)),
        markdown=str(tmp_path / "report.md"),
        json_out=str(tmp_path / "budget.json"),
        team_file=team_file(tmp_path, budget),
    )
    reader = rp.client(DEFAULT_READ_ONLY_KEY)
    now = datetime.fromtimestamp(rp.world.now(), UTC)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(team_budget.LABELS_ENV, json.dumps(labels or {}))
        return team_budget.run(args, client=reader, now=now)


def test_within_budget_passes_and_the_headline_has_the_figures(
    rp: InProcessRunPod, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spent = bill(rp, 10.0)
    assert check(rp, tmp_path, budget=10_000) == team_budget.EXIT_OK
    figures = json.loads((tmp_path / "budget.json").read_text())
    assert figures["spent"] == pytest.approx(spent, rel=0.01)  # GPUs, plus the disks' few cents
    assert figures["forecast"] == 300.0 and [r["stack"] for r in figures["runs"]] == ["dev", "prod"]
    assert figures["passed"] and not figures["over"]
    markdown = (tmp_path / "report.md").read_text().split("\n")
    assert markdown[1] == "## trainstack preview" and markdown[3].startswith("**Team budget ")
    assert "within budget" in markdown[3] and "prod n/a (not counted)" in markdown[3]
    assert "within budget" in capsys.readouterr().out
    assert rp.writes() == {"POST /v2/pods": {"201": 2}}  # the setup's; the check itself only read


def test_over_budget_fails_with_the_figures_and_only_an_allowed_override_passes(
    rp: InProcessRunPod, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bill(rp, 1.0)
    assert check(rp, tmp_path, budget=100) == team_budget.EXIT_OVER
    line = capsys.readouterr().out
    assert "forecast $300.00" in line and "of $100.00: OVER" in line
    assert check(rp, tmp_path, budget=100, labels={"budget-ok": "mallory"}) == team_budget.EXIT_OVER
    headline = (tmp_path / "report.md").read_text().split("\n")[3]
    assert "mallory" in headline and "may not override" in headline
    assert check(rp, tmp_path, budget=100, labels={"budget-ok": "alice"}) == team_budget.EXIT_OK
    figures = json.loads((tmp_path / "budget.json").read_text())
    assert figures["over"] and figures["passed"] and figures["override"]["set_by"] == "alice"
    assert "**overridden** by @\u2060alice" in (tmp_path / "report.md").read_text()


def test_month_to_date_starts_on_the_first_of_the_month(rp: InProcessRunPod) -> None:
    """A pod billed across the month's start counts only from the first, 00:00 UTC."""
    now = datetime.fromtimestamp(rp.world.now(), UTC)
    hours = (next_month(now) - now).total_seconds() / 3600 + 2.0
    hourly = bill(rp, hours) / hours
    reader = rp.client(DEFAULT_READ_ONLY_KEY)
    with reader:
        spent = team_budget.month_to_date(reader, datetime.fromtimestamp(rp.world.now(), UTC))
    assert spent == pytest.approx(2.0 * hourly, rel=0.01)


def test_a_missing_report_or_team_file_is_exit_2(rp: InProcessRunPod, tmp_path: Path) -> None:
    args = argparse.Namespace(
        report_json=str(tmp_path / "none.json"),
        markdown=None,
        json_out=None,
        team_file=team_file(tmp_path, 1),
    )
    reader = rp.client(DEFAULT_READ_ONLY_KEY)
    assert team_budget.run(args, client=reader) == team_budget.EXIT_FAILED
    with pytest.raises(TeamConfigError, match="monthly_budget_usd"):
        bad = tmp_path / "bad.yaml"
        bad.write_text('config: {"trainstack:team": {monthly_budget_usd: -1, override: {allowed: [a]}}}')
        load_team(bad)
    assert load_team(TEAM_FILE).monthly_budget_usd > 0  # the shipped file loads


def test_headline_is_inert_text_and_goes_under_the_title() -> None:
    f = BudgetFigures("2026-12", 100.0, 50.0, (("<b>x</b>", 80.0),), "ok", None, False)
    line = budget_headline(f)
    assert "<b>" not in line and "over budget by $30.00" in line and "check fails" in line
    assert with_headline("no title", "H").startswith("H\n\nno title")


def test_the_preview_reports_json_is_what_the_check_reads(tmp_path: Path) -> None:
    """A report the real renderer wrote from a recorded preview (prod scaled up: its run cost after)."""
    from report.cli import main as preview_report

    fixture = Path(__file__).resolve().parents[1] / "report" / "fixtures" / "prod-scale-up"
    out = tmp_path / "r.json"
    assert (
        preview_report(
            ["--recorded", str(fixture), "prod", "--json-out", str(out), "--out", str(tmp_path / "r.md")]
        )
        == 0
    )
    runs = team_budget.changed_runs(json.loads(out.read_text()))
    assert runs == [("prod", pytest.approx(6135.87))]


# Issue #62: bad input to the check is exit 2 with one line naming it, never a traceback; checked before
# RunPod's billing is read (no client is needed to refuse it).
BAD_REPORTS: dict[str, tuple[object, str]] = {
    "a list": ([{"stack": "dev"}], "the report is a JSON list, not an object"),
    "a stack without its name": ({"stacks": [{"changes": [{"op": "create"}]}]}, "stacks[0] has no `stack`"),
    "a NaN run cost": (
        {
            "stacks": [
                {"stack": "dev", "changes": [{"op": "update"}], "cost": {"after": {"per_run": math.nan}}}
            ]
        },
        "'dev': cost.after.per_run is nan",
    ),
    "a negative run cost": (
        {"stacks": [{"stack": "dev", "changes": [{"op": "update"}], "cost": {"after": {"per_run": -900.0}}}]},
        "'dev': cost.after.per_run is -900.0, not a finite amount >= 0",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
def test_a_report_that_is_not_the_preview_reports_is_exit_2_naming_the_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, said = BAD_REPORTS[case]
    (tmp_path / "r.json").write_text(json.dumps(body))  # json writes NaN as NaN, as a hand-made file may
    code = team_budget.main([str(tmp_path / "r.json"), "--team-file", str(team_file(tmp_path, 100))])
    err = capsys.readouterr().err
    assert code == team_budget.EXIT_FAILED, err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--markdown", "--json-out"])
def test_an_output_path_that_cannot_be_written_is_exit_2_before_the_check(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = team_budget.main(
        [str(report(tmp_path)), flag, str(tmp_path / "no-such-dir" / "x"), "--team-file",
         str(team_file(tmp_path, 100))]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == team_budget.EXIT_FAILED and f"{flag} {tmp_path / 'no-such-dir' / 'x'}: " in err, err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("config:\n  trainstack:team:\n    monthly_budget_usd: 1\n    monthly_budget_usd: 900000\n"
         "    override: {allowed: [a]}\n", "the key 'monthly_budget_usd' is given twice"),
        ("config:\n  trainstack:team: {monthly_budget_usd: .nan, override: {allowed: [a]}}\n",
         "monthly_budget_usd"),
        ("config:\n  trainstack:team: {monthly_budget_usd: 1e309, override: {allowed: [a]}}\n",
         "monthly_budget_usd"),
        ("config:\n  trainstack:team: {monthly_budget_usd: 5, override: {allowed: [a], allowed: [b]}}\n",
         "the key 'allowed' is given twice"),
    ],
)  # fmt: skip
def test_the_team_file_refuses_a_key_twice_and_numbers_that_are_not_finite(
    text: str, said: str, tmp_path: Path
) -> None:
    (tmp_path / "team.yaml").write_text(text)
    with pytest.raises(TeamConfigError, match=re.escape(said)):
        load_team(tmp_path / "team.yaml")


def test_the_override_login_and_label_are_compared_as_github_compares_them(tmp_path: Path) -> None:
    """GitHub logins (and label names) are case-insensitive: `Alice` is the allowed `alice`."""
    team = load_team(team_file(tmp_path, 100))
    now = datetime(2026, 12, 10, tzinfo=UTC)
    f = team_budget.figures(team, 50.0, [("dev", 300.0)], {"Budget-OK": "Alice"}, now)
    assert f.over and f.override_by == "Alice" and f.override_allowed and f.passed
    assert not team_budget.figures(team, 50.0, [("dev", 300.0)], {"budget-ok": "alicex"}, now).passed
