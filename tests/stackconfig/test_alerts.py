"""trainstack:alerts: validated with key paths at preview; one source for alerts.json and Prometheus rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from common.cachedir import cache_dir
from components.alerts import stack_alert_rules
from forecast.stack import stack_forecast
from stackconfig.alerts import AlertsConfig, alert_rules, prometheus_rules
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config
from train.monitor.rules import AlertRules

REPO = Path(__file__).resolve().parents[2]


def _rules(**kw: object) -> AlertRules:
    return alert_rules(
        AlertsConfig.model_validate(kw),
        cost_per_hour_usd=255.36,
        planned_hours=20,
        min_busbw_gb_per_s=100,
        gpu_memory_bytes=80e9,
    )


def test_defaults_are_the_articles_golden_metrics() -> None:
    r = _rules()
    assert (r.interval_s, r.util_low_ratio, r.util_high_ratio, r.nvme_p99_max_us, r.temperature_max_c) == (
        300,
        0.70,
        0.95,
        100,
        85,
    )
    assert (r.util_high_for_s, r.memory_idle_ratio, r.memory_idle_for_s) == (600, 0.10, 300)


def test_a_stack_without_alerts_gets_the_defaults() -> None:
    assert load_stack_config({}).alerts == AlertsConfig()


@pytest.mark.parametrize(
    ("alerts", "path", "needle"),
    [
        ({"util_low_pct": 120}, "trainstack:alerts.util_low_pct", "less than or equal to 100"),
        ({"interval_min": 0}, "trainstack:alerts.interval_min", "greater than 0"),
        ({"temperature_max_c": "hot"}, "trainstack:alerts.temperature_max_c", "number"),
        ({"stalled_after_min": float("nan")}, "trainstack:alerts.stalled_after_min", "finite"),
        ({"unreachable_after_rounds": True}, "trainstack:alerts.unreachable_after_rounds", "integer"),
        ({"util_low_pct": 96}, "trainstack:alerts", "must be below util_high_pct"),
        ({"webhook": "x"}, "trainstack:alerts.webhook", "extra"),
    ],
)
def test_bad_values_name_their_key(alerts: dict[str, object], path: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_stack_config({"trainstack:alerts": alerts})
    [problem] = err.value.problems
    assert problem.path == path
    assert needle.lower() in problem.message.lower()


def test_prometheus_rules_carry_the_same_thresholds() -> None:
    doc = yaml.safe_load(prometheus_rules(_rules(util_low_pct=60, temperature_max_c=80), "prod"))
    [group] = doc["groups"]
    by_name = {r["alert"]: r for r in group["rules"]}
    assert "< 0.6" in by_name["GpuUtilisationLow"]["expr"] and by_name["GpuUtilisationLow"]["for"] == "900s"
    assert "> 80" in by_name["GpuTemperatureHigh"]["expr"]
    assert by_name["GpuXid"]["labels"]["severity"] == "critical"
    assert "100000000000" in by_name["AllReduceBusBandwidthLow"]["expr"]
    assert group["interval"] == "300s"


def promtool() -> Path:
    """scripts/bootstrap unpacks it from Debian's prometheus package into the cache."""
    binary = cache_dir() / "promtool" / "promtool"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run scripts/bootstrap")
    return binary


@pytest.mark.parametrize("stack", ["dev", "search", "prod"])
def test_promtool_accepts_each_shipped_stacks_rules(stack: str, tmp_path: Path) -> None:
    raw = yaml.safe_load((REPO / f"stacks/Pulumi.{stack}.yaml").read_text())["config"]
    config = load_stack_config({k: v for k, v in raw.items() if not k.startswith("trainstack:secrets.")})
    path = tmp_path / "alerts.rules.yml"
    path.write_text(prometheus_rules(stack_alert_rules(config, stack_forecast(config)), stack))
    proc = subprocess.run(
        [str(promtool()), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    """The lint can fail: a rule whose expression does not parse is refused."""
    text = prometheus_rules(AlertRules(), "dev").replace(
        "trainstack_gpu_temperature_celsius{", "trainstack gpu{", 1
    )
    path = tmp_path / "alerts.rules.yml"
    path.write_text(text)
    proc = subprocess.run(
        [str(promtool()), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0


# Issue #34, class 4: every alert number finite and bounded, never a boolean, and numeric text read the same
# for every number field (as `pulumi config set --path` stores 2.5). (alerts, key, words of the problem)
ALERT_NUMBERS = [
    ({"stalled_after_min": 1e308}, "stalled_after_min", "less than or equal to 1440"),
    ({"startup_grace_min": 1e308}, "startup_grace_min", "less than or equal to 1440"),
    ({"budget_usd": int("9" * 401)}, "budget_usd", "valid number"),
    ({"interval_min": True}, "interval_min", "a boolean"),
    ({"util_low_pct": False}, "util_low_pct", "a boolean"),
    ({"nvme_p99_max_us": "nan"}, "nvme_p99_max_us", "finite"),
    ({"temperature_max_c": "inf"}, "temperature_max_c", "finite"),
    ({"unreachable_after_rounds": True}, "unreachable_after_rounds", "whole number"),
    ({"max_messages_per_hour": 2.5}, "max_messages_per_hour", "whole number"),
    ({"enabled": 1}, "enabled", "true or false"),
]


@pytest.mark.parametrize(
    ("alerts", "key", "words"), ALERT_NUMBERS, ids=[r[1] + "-" + str(r[0])[:20] for r in ALERT_NUMBERS]
)
def test_alert_numbers_are_finite_bounded_and_never_booleans(
    alerts: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_stack_config({"trainstack:alerts": alerts})
    (problem,) = caught.value.problems
    assert problem.path == f"trainstack:alerts.{key}" and words in problem.message


@pytest.mark.parametrize("key", ["interval_min", "max_run_hours"])
def test_numeric_text_is_read_alike_for_alerts_and_training(key: str) -> None:
    section = "alerts" if key == "interval_min" else "training"
    config = load_stack_config({f"trainstack:{section}": {key: "2.5"}})
    assert getattr(getattr(config, section), key) == 2.5
