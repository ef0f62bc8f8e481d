"""Forecast policies through `validate`, on forecasts the real forecast module computes from stack configs."""

from __future__ import annotations

from typing import Any

import pytest

from forecast.stack import stack_forecast
from policy.rules.forecast import COMPONENT, MODEL_FITS, MODEL_MAY_NOT_FIT, RUN_COST, RUN_HOURS
from stackconfig.loader import load_stack_config
from tests.components.conftest import stack_config
from tests.policy.factories import POD, check_stack, pod, stack_resource

# Llama-3-8B shapes on one 8 x H100 SXM pod ($31.93/h: 8 x $3.99 + its 50 GB disk), 2 h watchdog.
RAW: dict[str, Any] = {
    "trainstack:cluster": {"gpu_type": "H100_SXM", "nodes": 1, "gpus_per_node": 8},
    "trainstack:training": {
        "max_run_hours": 2,
        "model": {
            "parameters": 8.03e9,
            "tokens": 2.0e7,
            "sharding": "zero3",
            "layers": 32,
            "hidden_size": 4096,
            "attention_heads": 32,
            "vocab_size": 128256,
            "sequence_length": 4096,
            "activation_checkpointing": True,
        },
    },
}


def forecast_of(**model: Any) -> dict[str, Any]:
    raw = {
        **RAW,
        "trainstack:training": {
            **RAW["trainstack:training"],
            "model": {**RAW["trainstack:training"]["model"], **model},
        },
    }
    result = stack_forecast(load_stack_config(raw))
    assert result is not None
    return result.to_output()


def component(fc: dict[str, Any] | None, name: str = "dev") -> Any:
    return stack_resource(COMPONENT, name, {"cost_per_hour": 31.93, "forecast": fc})


def test_a_model_that_fits_passes_all_three() -> None:
    resources = [component(forecast_of()), stack_resource(POD, "dev-pod-0", pod())]
    for policy in (MODEL_FITS, MODEL_MAY_NOT_FIT, RUN_COST, RUN_HOURS):
        assert check_stack(policy, resources, {}).messages == []


def test_model_that_does_not_fit_is_refused_with_breakdown_and_cheapest_fix() -> None:
    fc = forecast_of(sharding="ddp", activation_checkpointing=False)
    assert not fc["fits"] and fc["verdict"] == "does not fit"
    assert check_stack(MODEL_MAY_NOT_FIT, [component(fc)], {}).messages == []
    (message,) = check_stack(MODEL_FITS, [component(fc)], {}).messages
    total = fc["memory_gb_per_gpu"]["total"]
    assert f"the model needs {total:.1f} GB per GPU" in message
    assert "weights 16.1 GB + gradients 16.1 GB + optimizer 96.4 GB + activations" in message
    assert "but each H100_SXM has 80 GB" in message
    assert f"Cheapest fix: {fc['fixes'][0]}." in message
    assert fc["fixes"][0].startswith("shard further: sharding zero")


def test_headroom_is_configurable() -> None:
    fc = forecast_of()
    mem = fc["memory_gb_per_gpu"]
    spare = mem["gpu"] - mem["total_low"]  # what the band's lower end leaves free
    assert check_stack(MODEL_FITS, [component(fc)], {"min_headroom_gb": spare - 1}).messages == []
    (message,) = check_stack(MODEL_FITS, [component(fc)], {"min_headroom_gb": spare + 1}).messages
    assert "even the lower end is 1.0 GB over with " in message and "GB kept free" in message


def test_a_band_that_straddles_the_gpu_is_advised_not_refused() -> None:
    """Micro-batch 6: the central estimate and the lower end fit 80 GB, the upper end does not."""
    fc = forecast_of(micro_batch_per_gpu=6)
    mem = fc["memory_gb_per_gpu"]
    assert mem["total_low"] <= 80 < mem["total_high"] and fc["verdict"] == "may not fit" and not fc["fits"]
    assert check_stack(MODEL_FITS, [component(fc)], {}).messages == []
    (message,) = check_stack(MODEL_MAY_NOT_FIT, [component(fc)], {}).messages
    assert (
        f"may not fit: {mem['total_low']:.1f}-{mem['total_high']:.1f} GB per GPU of 80 on each H100_SXM"
        in message
    )
    assert f"Cheapest fix: {fc['fixes'][0]}." in message
    assert MODEL_MAY_NOT_FIT.enforcement_level.value == "advisory"


def test_a_forecast_recorded_before_the_band_is_judged_on_its_total() -> None:
    fc = forecast_of(sharding="ddp", activation_checkpointing=False)
    old = {**fc, "memory_gb_per_gpu": {k: v for k, v in fc["memory_gb_per_gpu"].items() if "_" not in k}}
    (message,) = check_stack(MODEL_FITS, [component(old)], {}).messages
    total = old["memory_gb_per_gpu"]["total"]
    assert f"the model needs {total:.1f} GB per GPU ({total:.1f}-{total:.1f} GB" in message
    assert check_stack(MODEL_MAY_NOT_FIT, [component(old)], {}).messages == []


def test_run_over_budget_is_refused() -> None:
    fc = forecast_of(tokens=2.0e9)  # 100 x the dev run
    (message,) = check_stack(RUN_COST, [component(fc)], {"max_run_cost_usd": 100}).messages
    cost = fc["run_cost_usd"]
    assert cost > 100
    assert f"the forecast run costs ${cost:,.2f}" in message
    # the one hourly price: 8 GPUs at $3.99 and the container disk spread over the month
    assert f"{fc['hours']:.1f} h x $31.93/h on-demand" in message
    assert "over the budget of $100" in message


def test_run_longer_than_max_run_hours_is_advised_with_restarts() -> None:
    fc = forecast_of(tokens=2.0e9)
    assert fc["restarts"] >= 1
    (message,) = check_stack(RUN_HOURS, [component(fc)], {}).messages
    assert f"the run needs {fc['hours']:.1f} h but training.max_run_hours is 2" in message
    assert f"stops it {fc['restarts']} time(s)" in message
    assert check_stack(RUN_HOURS, [component(fc)], {"max_restarts": fc["restarts"]}).messages == []


def test_a_stack_without_a_model_passes_with_an_advisory_note() -> None:
    resources = [component(None)]
    assert check_stack(MODEL_FITS, resources, {}).messages == []
    assert check_stack(RUN_COST, resources, {}).messages == []
    (note,) = check_stack(RUN_HOURS, resources, {}).messages
    assert "declares no trainstack:training.model" in note


def test_resources_without_the_component_are_not_the_forecast_policies_business() -> None:
    for policy in (MODEL_FITS, MODEL_MAY_NOT_FIT, RUN_COST, RUN_HOURS):
        assert check_stack(policy, [stack_resource(POD, "p", pod())], {}).messages == []


@pytest.mark.parametrize("stack", ["dev", "search", "prod"])
def test_shipped_stacks_pass_their_own_policy_config(stack: str) -> None:
    import json
    from pathlib import Path

    settings = json.loads((Path(__file__).parents[2] / "policy/config" / f"{stack}.json").read_text())
    result = stack_forecast(stack_config(stack))
    assert result is not None
    resources = [component(result.to_output(), stack)]
    for policy in (MODEL_FITS, MODEL_MAY_NOT_FIT, RUN_COST, RUN_HOURS):
        assert check_stack(policy, resources, settings[policy.name]).messages == [], policy.name


# Issue #34, class 2: a declared model whose forecast figures are missing or not finite fails closed, each
# mandatory policy naming the field (ForecastOutput's message); the advisory ones leave it to them.
def _broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    fc = forecast_of()
    target = fc
    for key in path[:-1]:
        target = target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return fc


_DROP = object()
UNKNOWN_FORECASTS = [
    (("run_cost_usd",), _DROP, "forecast has no `run_cost_usd`"),
    (("run_cost_usd",), float("nan"), "forecast.run_cost_usd is not a finite number (got nan)"),
    (("run_cost_usd",), float("inf"), "forecast.run_cost_usd is not a finite number (got inf)"),
    (("run_cost_usd",), "cheap", "forecast.run_cost_usd is not a finite number (got 'cheap')"),
    (("memory_gb_per_gpu", "total"), float("nan"), "forecast.memory_gb_per_gpu.total is not a finite number"),
    (("memory_gb_per_gpu", "gpu"), _DROP, "forecast.memory_gb_per_gpu has no `gpu`"),
    (("restarts",), 1.5, "forecast.restarts is not a whole number (got 1.5)"),
    (("fits",), "yes", "forecast.fits is not true or false (got 'yes')"),
]


@pytest.mark.parametrize(("path", "value", "words"), UNKNOWN_FORECASTS)
def test_a_forecast_figure_that_cannot_be_read_fails_closed(
    path: tuple[str, ...], value: Any, words: str
) -> None:
    resources = [component(_broken(path, value)), stack_resource(POD, "dev-pod-0", pod())]
    for policy in (MODEL_FITS, RUN_COST):
        (message,) = check_stack(policy, resources, {}).messages
        assert words in message and "refused rather than let it through" in message, message
    for policy in (MODEL_MAY_NOT_FIT, RUN_HOURS):
        assert check_stack(policy, resources, {}).messages == [], policy.name


def test_a_forecast_figure_not_known_yet_fails_closed_naming_it() -> None:
    """An unresolved value inside the forecast (the engine's sentinel) is not a number: refused, named."""
    from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE as SENTINEL

    resources = [component(_broken(("hours",), SENTINEL))]
    (message,) = check_stack(RUN_COST, resources, {}).messages
    assert "forecast.hours is not a finite number (got UNKNOWN)" in message
