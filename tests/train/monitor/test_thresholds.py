"""The alert thresholds' one table: each `AlertRules` field has its row; config, rules and report use it."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from report.alerts import alert_changes
from stackconfig.alerts import AlertsConfig, alert_rules
from train.monitor.rules import BY_CONFIG_KEY, BY_FIELD, THRESHOLDS, AlertRules, RulesError


def test_every_alert_rules_field_has_one_row_and_every_row_a_field() -> None:
    names = [t.field for t in THRESHOLDS]
    assert len(names) == len(set(names))
    assert set(names) == {f.name for f in fields(AlertRules)}


def test_every_config_threshold_has_one_row_and_every_row_key_a_config_field() -> None:
    keys = [t.config_key for t in THRESHOLDS if t.config_key is not None]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(AlertsConfig.model_fields) - {"enabled"}


def test_a_field_added_without_a_row_is_refused() -> None:
    @dataclass(frozen=True)
    class Wider(AlertRules):
        gpu_power_max_w: float = 700.0

    with pytest.raises(RulesError, match=r"alerts\.gpu_power_max_w: AlertRules and THRESHOLDS"):
        Wider()


def test_the_defaults_are_the_tables_in_both_units() -> None:
    config = AlertsConfig()
    for key, row in BY_CONFIG_KEY.items():
        assert getattr(config, key) == row.default
    rules = AlertRules()
    for name, row in BY_FIELD.items():
        assert getattr(rules, name) == row.rule_default
    assert rules.interval_s == 300.0 and rules.util_low_ratio == 0.7 and rules.unreachable_after == 2


def test_alert_rules_converts_every_config_key_by_its_factor() -> None:
    config = AlertsConfig(util_low_pct=61, keep_firing_for_min=7, unreachable_after_rounds=3, budget_usd=10)
    rules = alert_rules(
        config, cost_per_hour_usd=255.0, planned_hours=3.0, min_busbw_gb_per_s=40.0, gpu_memory_bytes=8e10
    )
    assert rules.util_low_ratio == 0.61 and rules.keep_firing_for_s == 420.0
    assert rules.unreachable_after == 3 and isinstance(rules.unreachable_after, int)
    assert (rules.budget_usd, rules.cost_per_hour_usd, rules.planned_hours) == (10, 255.0, 3.0)
    assert (rules.min_busbw_gb_per_s, rules.gpu_memory_bytes) == (40.0, 8e10)


def test_the_report_shows_keep_firing_for_in_minutes() -> None:
    before = AlertRules().as_output()
    after = AlertRules(keep_firing_for_s=600.0).as_output()
    assert alert_changes(before, after) == [
        ("alert resolves after false for (`keep_firing_for_s`)", "5 min", "10 min")
    ]
