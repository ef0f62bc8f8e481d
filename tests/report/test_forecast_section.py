"""The report's forecast section (before -> after), and folding changes that differ only in their index."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from common.outputs import ForecastOutput
from forecast.compare import stack_output
from report.forecast import forecast_json, forecast_table
from report.groups import group_changes, index_range
from report.parse import PreviewParseError, PropertyChange, ResourceChange, forecast_output
from stackconfig.loader import load_stack_config
from tests.components.conftest import stack_config


def _pod(i: int, op: str = "create", gpus: str = "8") -> ResourceChange:
    props = (
        PropertyChange("gpu_count", None, gpus, False),
        PropertyChange("name", None, f'"trainstack-search-pod-{i}"', False),
    )
    return ResourceChange(
        f"urn:pulumi:search::trainstack::pulumi-python:dynamic/runpod:Pod::search-pod-{i}",
        f"search-pod-{i}",
        "pulumi-python:dynamic/runpod:Pod",
        op,
        props,
    )


def test_index_ranges() -> None:
    assert index_range([3, 0, 1, 2]) == "[0-3]"
    assert index_range([0, 1, 2, 3, 5, 7, 8]) == "[0-3,5,7-8]"
    assert index_range([4]) == "[4]"


def test_pods_differing_only_in_their_index_are_one_row() -> None:
    (group,) = group_changes([_pod(i) for i in (0, 1, 10, 2, 3)])
    assert (group.count, group.label) == (5, "search-pod-[0-3,10]")
    assert group.changes[1].after == '"trainstack-search-pod-[0-3,10]"'


def test_a_real_difference_keeps_pods_apart() -> None:
    groups = group_changes([_pod(0), _pod(1), _pod(2, gpus="4"), _pod(3, op="update")])
    assert [(g.label, g.count) for g in groups] == [
        ("search-pod-[0-1]", 2),
        ("search-pod-2", 1),
        ("search-pod-3", 1),
    ]


def test_names_without_an_index_are_never_folded() -> None:
    secret = ResourceChange("urn:a", "search-secret-hf", "pulumi-python:dynamic/runpod:Secret", "create", ())
    groups = group_changes([secret, replace(secret, urn="urn:b")])
    assert [g.count for g in groups] == [1, 1]


def _fc(raw: Any) -> ForecastOutput | None:
    """The stack output as report/parse.py hands it to the section: parsed once."""
    return forecast_output(raw, "test")


def _dev_forecast(tokens: float) -> dict[str, Any]:
    config = stack_config("dev")
    assert config.training.model is not None
    model = config.training.model.model_copy(update={"tokens": tokens})
    result = stack_output(
        config.model_copy(update={"training": config.training.model_copy(update={"model": model})})
    )
    assert result is not None
    return result


def test_doubling_tokens_shows_the_run_cost_doubling() -> None:
    before, after = _dev_forecast(2.0e7), _dev_forecast(4.0e7)
    rows = "\n".join(forecast_table(_fc(before), _fc(after)))
    b, a = before["run_cost_usd"], after["run_cost_usd"]
    assert isinstance(b, float) and isinstance(a, float)
    change = (a - b) / b * 100  # 100 % up to the cents' rounding of the two costs
    assert change == pytest.approx(100.0, abs=0.5)
    assert f"| run cost, on-demand | ${b:,.2f} | ${a:,.2f} | +${a - b:,.2f} | {change:+.1f}% |" in rows
    assert "| hours |" in rows and "+100.0% |" in rows
    mem = after["memory_gb_per_gpu"]
    band = f"({mem['total_low']:,.1f}-{mem['total_high']:,.1f} GB)"
    assert f"| fits the GPU's memory | yes {band} of 80 GB | yes {band} of 80 GB | | |" in rows
    assert forecast_json(_fc(before), _fc(after))["delta_run_cost_usd"] == round(a - b, 2)


def test_a_new_forecast_and_none_at_all() -> None:
    after = _dev_forecast(2.0e7)
    rows = "\n".join(forecast_table(None, _fc(after)))
    assert "| fits the GPU's memory | n/a | yes (" in rows
    assert forecast_table(None, None) == []
    assert load_stack_config({}).training.model is None


def test_the_cheapest_feasible_line_and_its_saving() -> None:
    after = _dev_forecast(2.0e7)
    summary = after["compare"]
    assert isinstance(summary, dict)
    best = summary["cheapest_feasible"]
    rows = forecast_table(None, _fc(after))
    shape = f"{best['nodes']} x {best['gpus_per_node']} {best['gpu']}, {best['sharding']}"
    assert rows[-1] == (
        f"cheapest feasible: {shape} ${best['run_cost_usd']:,.2f} (-${summary['saving_usd']:,.2f}) "
        "(`scripts/forecast <stack> --compare`)"
    )
    assert summary["saving_usd"] > 0  # dev's 8 x H100 pod is not the cheapest way to run its 2e7 tokens
    configured = {**after, "compare": {**summary, "cheapest_feasible": {**best, "is_configured": True}}}
    assert forecast_table(None, _fc(configured))[-1].endswith("(the stack as configured)")
    nothing = {**after, "compare": {**summary, "cheapest_feasible": None}}
    assert "none of the GPU types" in forecast_table(None, _fc(nothing))[-1]


def test_a_band_that_straddles_the_gpu_reads_may_not_fit() -> None:
    after = _dev_forecast(2.0e7)
    mem = {**after["memory_gb_per_gpu"], "total_low": 70.0, "total_high": 90.0}  # type: ignore[dict-item]
    rows = "\n".join(
        forecast_table(
            None, _fc({**after, "memory_gb_per_gpu": mem, "verdict": "may not fit", "fits": False})
        )
    )
    assert "| fits the GPU's memory | n/a | **may not fit** (70.0-90.0 GB) of 80 GB | | |" in rows


def test_a_forecast_recorded_before_the_band_shows_without_it() -> None:
    after = _dev_forecast(2.0e7)
    old = {k: v for k, v in after.items() if k not in ("compare", "verdict")}
    old["memory_gb_per_gpu"] = {k: v for k, v in after["memory_gb_per_gpu"].items() if "_" not in k}  # type: ignore[union-attr]
    rows = forecast_table(None, _fc(old))
    assert "| fits the GPU's memory | n/a | yes of 80 GB | | |" in rows
    assert not any(r.startswith("cheapest feasible") for r in rows)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("hours", "long", "test: forecast.hours is not a finite number (got 'long')"),
        ("run_cost_usd", None, "test: forecast has no `run_cost_usd`"),
        ("memory_gb_per_gpu", [], "test: forecast.memory_gb_per_gpu is not a map (got list)"),
    ],
)
def test_a_malformed_forecast_is_refused_at_the_boundary_naming_the_field(
    key: str, value: Any, words: str
) -> None:
    with pytest.raises(PreviewParseError) as err:
        _fc({**_dev_forecast(2.0e7), key: value})
    assert str(err.value).startswith(words)
