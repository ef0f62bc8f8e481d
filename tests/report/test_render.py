"""Rendering records as Markdown/JSON: golden files from recorded previews, cost arithmetic, exit codes.

Set UPDATE_GOLDEN=1 to rewrite tests/report/golden/ after an intended change, then read the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from report.cli import (
    EXIT_FAILED,
    EXIT_MANDATORY,
    EXIT_OK,
    RecordedRunner,
    exit_code,
    main,
    report_stack,
)
from report.parse import Preview, ResourceCost, parse_events
from report.render import MARKER, build, cell, percent, render_markdown, to_json, totals, usd
from tests.report.program.fake import GPU_HOURLY
from tests.report.scenarios import FIXTURES, HF_TOKEN, SCENARIOS, Scenario

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it)"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_golden_reports(scenario: Scenario, tmp_path: Path) -> None:
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    main(
        ["--recorded", str(FIXTURES / scenario.name), scenario.stack, "--out", str(md), "--json-out", str(js)]
    )
    check_golden(f"{scenario.name}.md", md.read_text())
    check_golden(f"{scenario.name}.json", js.read_text())
    assert HF_TOKEN not in md.read_text() + js.read_text()


REAL = sorted(p.name for p in FIXTURES.glob("real-*"))


@pytest.mark.parametrize("name", REAL)
def test_golden_reports_of_the_real_program(name: str, tmp_path: Path) -> None:
    """Previews of the trainstack program itself against the local RunPod (`--real` recordings)."""
    stack = name.removeprefix("real-")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    main(["--recorded", str(FIXTURES / name), stack, "--out", str(md), "--json-out", str(js)])
    check_golden(f"{name}.md", md.read_text())
    check_golden(f"{name}.json", js.read_text())
    assert "local-demo-" not in md.read_text() + js.read_text()  # the demo secret values


def test_stack_and_component_totals_are_not_counted_again() -> None:
    # The real program re-exports cost_per_hour on the stack and its H100Cluster component.
    report = report_stack(RecordedRunner(FIXTURES / "real-prod"), "prod")
    priced = [c.type.rsplit(":", 1)[-1] for c in report.before if c.cost_per_hour or c.storage_cost_per_month]
    assert priced == ["InstantCluster", "NetworkVolume"]
    assert report.before_totals.hourly == pytest.approx(4 * 8 * GPU_HOURLY)
    assert report.after_totals.hourly == pytest.approx(8 * 8 * GPU_HOURLY)


def test_real_prod_recording_is_the_clean_four_to_eight_node_change() -> None:
    """The sample's prod: the real program's preview of the shipped 8 nodes over a 4-node deploy."""
    report = report_stack(RecordedRunner(FIXTURES / "real-prod"), "prod")
    assert not report.preview.failed
    assert [(c.name, c.op) for c in report.preview.changes if c.op != "same"] == [("prod-cluster", "replace")]
    assert report.after_totals.hourly - report.before_totals.hourly == pytest.approx(4 * 8 * GPU_HOURLY)
    assert report.mandatory == 0


def test_prod_four_to_eight_nodes_costs_four_nodes_more() -> None:
    report = report_stack(RecordedRunner(FIXTURES / "prod-scale-up"), "prod")
    four_nodes = 4 * 8 * GPU_HOURLY
    assert report.after_totals.hourly - report.before_totals.hourly == pytest.approx(four_nodes)
    assert report.mandatory == 0
    data = to_json([report])["stacks"][0]
    assert data["cost"]["delta_hourly"] == pytest.approx(four_nodes)
    assert data["cost"]["before"]["run_hours"] == 24.0


def test_over_budget_change_shows_the_violation_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--recorded", str(FIXTURES / "prod-over-budget"), "prod"])
    out = capsys.readouterr().out
    assert code == EXIT_MANDATORY
    assert out.startswith(MARKER)
    assert "| mandatory | `hourly-burn-limit` | (stack) |" in out
    assert "❌ 2 mandatory" in out


def test_several_stacks_in_one_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for scenario in ("prod-scale-up", "search-shrink"):
        for f in (FIXTURES / scenario).iterdir():
            (tmp_path / f.name).write_text(f.read_text())
    assert main(["--recorded", str(tmp_path), "prod", "search"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.count(MARKER) == 1
    assert "### Stack `prod`" in out and "### Stack `search`" in out


def test_missing_recording_is_a_clean_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--recorded", str(tmp_path), "prod"]) == EXIT_FAILED
    assert "preview-report:" in capsys.readouterr().err


def _stream(*events: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in (*events, {"summaryEvent": {"result": "failed"}})]


def test_failed_preview_without_violations_exits_2_and_shows_the_error() -> None:
    lines = _stream({"diagnosticEvent": {"severity": "error", "message": "program crashed: KeyError\n"}})
    report = build("dev", parse_events(lines), ())
    assert "- error: program crashed: KeyError" in render_markdown([report])
    assert exit_code([report]) == EXIT_FAILED


def test_a_plaintext_token_in_env_is_never_rendered() -> None:
    token = "hf_" + "x" * 36
    new = {"inputs": {"env": {"HF_TOKEN": token}, "cost_per_hour": 1.0, "gpu_count": 1}}
    step = {"op": "create", "urn": "urn:pulumi:dev::p::pulumi-python:dynamic/runpod:Pod::a", "new": new}
    report = build("dev", parse_events(_stream({"resourcePreEvent": {"metadata": step}})), ())
    text = render_markdown([report]) + json.dumps(to_json([report]))
    assert token not in text
    assert '`env.HF_TOKEN`: "\\[secret\\]"' in text  # brackets escaped: literal text, never a link


def cost(
    name: str, hourly: float | None, storage: float | None = 0.0, hours: float | None = None
) -> ResourceCost:
    return ResourceCost(f"urn::{name}", name, "t", hourly, storage, hours)


def test_run_cost_uses_own_hours_then_the_longest_then_config() -> None:
    costs = [cost("pod", 10.0, 73.0, 2.0), cost("vol", 0.0, 730.0)]
    t = totals(costs, config_run_hours=99.0)
    # pod: (10 + 73/730) x 2; volume: 1 $/h x the longest run (2 h), not the config's 99 h
    assert t.per_run == pytest.approx(10.1 * 2 + 1.0 * 2)
    assert totals([cost("vol", 0.0, 730.0)], config_run_hours=5.0).per_run == pytest.approx(5.0)
    assert totals([cost("vol", 0.0, 730.0)], config_run_hours=None).per_run is None


def test_unknown_costs_make_totals_a_floor_and_say_so() -> None:
    t = totals([cost("a", None), cost("b", 3.0)], None)
    assert (t.hourly, t.complete) == (3.0, False)
    preview = Preview((), (cost("a", None),), (), (), None, False)
    assert "unknown until apply" in render_markdown([build("x", preview, ())])


def test_text_helpers() -> None:
    assert cell("a|b\nc") == "a\\|b<br>c"
    assert cell("x" * 100, 10) == "x" * 9 + "…"
    assert (usd(1234.5), usd(-2.0), usd(3.0, signed=True), usd(None)) == (
        "$1,234.50",
        "-$2.00",
        "+$3.00",
        "n/a",
    )
    assert (percent(100, 150), percent(0, 5), percent(0, 0), percent(None, 1)) == (
        "+50.0%",
        "new",
        "0%",
        "n/a",
    )


def test_headline_run_cost_follows_the_forecast_a_tokens_x10_change_shows_x10() -> None:
    """prod with 10 x the tokens: the same resources and $/h, the forecast's hours x 10, so the headline's
    run cost (the stack output cost_per_run) x 10, not $/h x max_run_hours twice."""
    import yaml

    from forecast.stack import stack_forecast
    from stackconfig.loader import load_stack_config

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "stacks/Pulumi.prod.yaml").read_text())[
        "config"
    ]
    before_fc = stack_forecast(load_stack_config(raw))
    model = raw["trainstack:training"]["model"]
    model["tokens"] = float(model["tokens"]) * 10
    after_fc = stack_forecast(load_stack_config(raw))
    assert before_fc is not None and after_fc is not None
    from common.outputs import ForecastOutput
    from facts.money import SNAPSHOT

    disks, volume = SNAPSHOT.container_disk_monthly(8 * 100), SNAPSHOT.volume_monthly(2000)
    resources = (cost("prod-cluster", 255.36, disks, 24), cost("prod-volume", 0.0, volume))
    # no resource changes (the model is not a resource input): each carries over from the state
    after_out = ForecastOutput.from_output(after_fc.to_output())
    preview = Preview((), (), (), (), 24, False, forecast=after_out)
    report = build(
        "prod", preview, resources, before_forecast=ForecastOutput.from_output(before_fc.to_output())
    )
    b, a = report.before_totals, report.after_totals
    assert (b.run_basis, a.run_basis) == ("forecast", "forecast")
    assert a.per_hour == b.per_hour
    # the training hours x 10; prod's burn-in (training.burn_in_min, once on new nodes) is in both the same
    burn_in_usd = float(raw["trainstack:training"]["burn_in_min"]) / 60 * b.per_hour
    assert (a.per_run or 0) - burn_in_usd == pytest.approx(10 * ((b.per_run or 0) - burn_in_usd), rel=1e-3)
    # the forecast's own run cost, the figure its section shows (to the output's rounding of $/h to cents)
    assert b.per_run == pytest.approx(before_fc.cost.run_usd, abs=0.5)
    headline = render_markdown([report]).splitlines()[5]
    assert headline.startswith("| `prod` |") and f"{usd(b.per_run)} → {usd(a.per_run)}" in headline


# Issue #34, class 3: values anyone opening a pull request controls, through the real entry point
# (`python -m report --recorded`). Each (where it enters, the hostile value); none may render live.
HOSTILE = [
    ("registry username", '<img src=x onerror="alert(1)">'),
    ("resource name", "pod-[click me](https://evil.example/phish)"),
    ("resource name", "pod-@team-please-approve"),
    ("resource name", "pod-`-unbalanced"),
    ("resource name", "pod-``-double"),
    ("property value", "</td></tr></table><script>x()</script>"),
    ("property value", "![tracker](https://evil.example/p.png)"),
    ("property value", "a | b | c"),
    ("engine message", "refused value <details open><summary>@org/admins</summary>"),
    ("engine message", "https://evil.example/login"),
]


def _hostile_recording(tmp_path: Path, value: str) -> Path:
    name = value.replace("/", "_").replace(":", "_")
    urn = f"urn:pulumi:dev::p::pulumi-python:dynamic/runpod:Pod::{name}"
    step = {
        "op": "create",
        "urn": urn,
        "new": {"inputs": {"username": value, "image": value, "cost_per_hour": 1.0, "gpu_count": 1}},
    }
    events = [
        {"resourcePreEvent": {"metadata": step}},
        {"diagnosticEvent": {"severity": "warning", "message": f"{value}\n"}},
        {
            "policyEvent": {
                "enforcementLevel": "advisory",
                "message": f"refused {value}",
                "policyName": "x",
                "resourceUrn": urn,
            }
        },
        {"summaryEvent": {"result": "succeeded"}},
    ]
    (tmp_path / "dev.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "dev.export.json").write_text(json.dumps({"deployment": {"resources": []}, "version": 3}))
    return tmp_path


_LIVE = [
    re.compile(r"<(?!br>)[a-zA-Z/!]"),  # an HTML tag other than our own <br>
    re.compile(r"(?<!\\)\[[^\]]*(?<!\\)\]\("),  # a Markdown link or image
    re.compile(r"@(?!\u2060)\w"),  # a mention
    re.compile(r"https?://"),  # a bare URL GitHub would link
]


@pytest.mark.parametrize(("where", "value"), HOSTILE, ids=[f"{w}: {v[:24]}" for w, v in HOSTILE])
def test_hostile_values_render_as_inert_text(
    where: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--recorded", str(_hostile_recording(tmp_path, value)), "dev"])
    out = capsys.readouterr().out
    body = out.removeprefix(MARKER)
    # What a code span holds is shown literally (GFM never parses HTML, links or mentions inside one).
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", body)
    live = [p.pattern for p in _LIVE if p.search(prose)]
    assert live == [], f"{where}: {value!r} renders live ({live}):\n{body}"
    for line in body.splitlines():
        if line.startswith("|"):  # a table row keeps its columns: no unescaped pipe from the value
            cells = re.split(r"(?<!\\)\|", line)
            assert len(cells) in (6, 7), line  # summary (5 columns) or changes/policy tables (4-5)
        ticks = len(re.findall(r"(?<!\\)`", line))
        assert ticks % 2 == 0 or "``" in line, f"unbalanced code span: {line}"
