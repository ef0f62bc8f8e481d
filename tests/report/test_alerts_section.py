"""The report's alerts section: a PR that moves a threshold shows that row, before -> after."""

from __future__ import annotations

import json

from components.alerts import stack_alert_rules
from forecast.stack import stack_forecast
from report.alerts import alert_changes, alerts_json, alerts_table
from report.parse import parse_events
from report.render import build, render_markdown
from stackconfig.alerts import AlertsConfig
from tests.components.conftest import stack_config


def _rules(run_cap: float | None = None, **alerts: object) -> dict[str, object]:
    config = stack_config("prod")
    config = config.model_copy(update={"alerts": AlertsConfig.model_validate(alerts)})
    if run_cap is not None:  # the one cost cap, trainstack:run.max_cost_usd (prod's stack file sets 10,000)
        config = config.model_copy(update={"run": config.run.model_copy(update={"max_cost_usd": run_cap})})
    return stack_alert_rules(config, stack_forecast(config)).as_output()


def test_only_changed_thresholds_are_rows_in_the_configs_units() -> None:
    before, after = _rules(), _rules(util_low_pct=60, stalled_after_min=30)
    assert alert_changes(before, after) == [
        ("GPU utilisation low below (`util_low_ratio`)", "70 %", "60 %"),
        ("training stalled after (`stalled_after_s`)", "15 min", "30 min"),
    ]
    assert alert_changes(before, before) == [] and alerts_table(before, before) == []
    assert alerts_json(before, after)[0] == {
        "rule": "GPU utilisation low below (`util_low_ratio`)",
        "before": "70 %",
        "after": "60 %",
    }


def test_a_new_stack_shows_every_threshold_against_nothing() -> None:
    rows = alert_changes(None, _rules())
    assert len(rows) >= 15 and all(b == "-" for _, b, _a in rows)


def _events(alerts: dict[str, object]) -> list[str]:
    stack_outputs = {
        "resOutputsEvent": {
            "metadata": {"new": {"type": "pulumi:pulumi:Stack", "outputs": {"alerts": alerts}}}
        }
    }
    return [json.dumps(stack_outputs), json.dumps({"summaryEvent": {"result": "succeeded"}})]


def test_the_report_renders_the_section_from_the_preview_and_the_state() -> None:
    before, after = _rules(), _rules(run_cap=9000, temperature_max_c=80)
    preview = parse_events(_events(after))
    assert preview.alerts == after
    text = render_markdown([build("prod", preview, (), None, before)])
    assert "**Alert rules**" in text
    assert "| GPU temperature above (`temperature_max_c`) | 85 C | 80 C |" in text
    assert "| projected run cost above (`budget_usd`) | 10,000 USD | 9,000 USD |" in text
    unchanged = render_markdown([build("prod", parse_events(_events(before)), (), None, before)])
    assert "**Alert rules**" not in unchanged
