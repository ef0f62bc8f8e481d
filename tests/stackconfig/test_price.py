"""The stack's one hourly price equals what the providers' check() price, and the one run cost follows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components import cluster as cluster_module
from facts.money import burn_per_hour
from forecast.stack import run_cost, stack_forecast
from providers.runpod import catalog
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.inputs import NetworkVolumeInputs
from providers.runpod.pod import PodProvider
from providers.runpod.volume import NetworkVolumeProvider
from stackconfig.config import StackConfig
from stackconfig.loader import load_stack_config
from stackconfig.pricing import stack_price

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name.split(".")[1] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


def _config(stack: str, **changes: Any) -> StackConfig:
    raw = yaml.safe_load((REPO / f"stacks/Pulumi.{stack}.yaml").read_text())["config"]
    return load_stack_config(raw | changes)


def _checked_costs(stack: str, cfg: StackConfig) -> list[dict[str, Any]]:
    """What each RunPod resource's provider `costs()` (the tail of `check()`) gives the stack's inputs."""
    props = cluster_module._container_fields(stack, cfg, None)
    out = []
    if cfg.cluster.topology == "cluster":
        inputs = cluster_module._cluster_inputs(stack, cfg, props)
        out.append(InstantClusterProvider().costs(inputs.to_props()))
    else:
        for i in range(cfg.cluster.nodes):
            out.append(PodProvider().costs(cluster_module._pod_inputs(stack, i, cfg, props).to_props()))
    if cfg.cluster.volume_gb:
        volume = NetworkVolumeInputs(
            name="v", size_gb=cfg.cluster.volume_gb, data_center_id="US-TX-3", volume_type="STANDARD"
        )
        out.append(NetworkVolumeProvider().costs(volume.to_props()))
    return out


@pytest.fixture
def snapshot_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The providers read the price snapshot, as they do with no catalog to read."""
    catalog.reset_cache()
    monkeypatch.setattr(catalog, "price_book", lambda _factory: catalog.snapshot("test"))


@pytest.mark.parametrize("stack", SHIPPED)
@pytest.mark.usefixtures("snapshot_prices")
def test_the_one_hourly_price_is_the_sum_of_the_providers_check_costs(stack: str) -> None:
    cfg = _config(stack)
    costs = _checked_costs(stack, cfg)
    summed = burn_per_hour(
        sum(c["cost_per_hour"] for c in costs), sum(c["storage_cost_per_month"] for c in costs)
    )
    assert stack_price(cfg).usd_per_hour == round(summed, 2)
    # the component's cost_per_hour output applies the same rule to those figures
    hourly = [c["cost_per_hour"] for c in costs] + [c["storage_cost_per_month"] for c in costs]
    assert cluster_module._hourly(hourly, len(costs)) == stack_price(cfg).usd_per_hour


@pytest.mark.parametrize("stack", SHIPPED)
def test_the_forecast_and_the_alerts_use_the_one_price(stack: str) -> None:
    from components.alerts import stack_alert_rules

    cfg = _config(stack)
    price = stack_price(cfg)
    assert stack_alert_rules(cfg, stack_forecast(cfg)).cost_per_hour_usd == price.usd_per_hour
    fc = stack_forecast(cfg)
    if fc is not None:
        assert round(fc.cost.usd_per_hour, 2) == price.usd_per_hour


def test_run_cost_is_the_forecast_when_a_model_is_declared_and_scales_with_tokens() -> None:
    cfg = _config("prod")
    run = run_cost(cfg)
    fc = stack_forecast(cfg)
    assert fc is not None and run.basis == "forecast" and run.usd == round(fc.cost.run_usd, 2)
    model = cfg.training.model
    assert model is not None
    raw = yaml.safe_load((REPO / "stacks/Pulumi.prod.yaml").read_text())["config"]
    raw["trainstack:training"]["model"]["tokens"] = model.tokens * 10
    ten = run_cost(load_stack_config(raw))
    # the training hours x 10; burn-in (training.burn_in_min, once on new nodes) is the same in both
    burn_in_usd = cfg.training.burn_in_min / 60 * fc.cost.usd_per_hour
    assert ten.usd - burn_in_usd == pytest.approx((run.usd - burn_in_usd) * 10, rel=1e-3)
    assert "forecast" in run.label


def test_run_cost_without_a_model_is_the_price_times_max_run_hours() -> None:
    cfg = _config("local-cpu")
    assert cfg.training.model is None
    run = run_cost(cfg)
    assert run.basis == "max_run_hours"
    assert run.usd == round(stack_price(cfg).usd_per_hour * cfg.training.max_run_hours, 2)
    assert "max_run_hours" in run.label
