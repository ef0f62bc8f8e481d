"""One hourly price: `stackconfig.pricing` says what the providers' own check() computes for each shipped
stack at the price snapshot (compute per hour, storage per month), resource by resource as H100Cluster
declares them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from pulumi.dynamic import ResourceProvider

from components.cluster import H100Cluster, H100ClusterArgs
from facts.money import HOURS_PER_MONTH
from providers.runpod import catalog, errors
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.pod import PodProvider
from providers.runpod.volume import NetworkVolumeProvider
from stackconfig import files, pricing
from stackconfig.config import StackConfig
from tests.components.test_cluster import CLUSTER, POD, SECRET_VALUES, VOLUME, FakeProviders

PROVIDERS: dict[str, type[ResourceProvider]] = {
    POD: PodProvider,
    CLUSTER: InstantClusterProvider,
    VOLUME: NetworkVolumeProvider,
}


def _no_key() -> Any:
    raise errors.RunPodSettingsError("no RunPod API key (this test prices at the snapshot)")


@pytest.fixture(autouse=True)
def _snapshot_prices(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAINSTACK_CATALOG_TTL_S", "0")  # never another process's live catalog
    catalog.reset_cache()
    yield
    catalog.reset_cache()


@pytest.fixture
def fake() -> FakeProviders:
    mocks = FakeProviders()
    pulumi.runtime.set_mocks(mocks, preview=False)
    return mocks


def _checked_costs(fake: FakeProviders) -> list[tuple[str, float, float]]:
    """(type, cost_per_hour, storage_cost_per_month) of every priced resource, from its provider's check()."""
    out = []
    for r in fake.resources:
        if r.typ not in PROVIDERS:
            continue
        provider = PROVIDERS[r.typ](_no_key)  # type: ignore[call-arg]
        inputs = {k: v for k, v in r.inputs.items() if k != "__provider"}
        result = provider.check({}, inputs)
        assert not result.failures, (r.name, result.failures)
        assert str(result.inputs["price_source"]).startswith("snapshot-")
        out.append((r.typ, result.inputs["cost_per_hour"], result.inputs["storage_cost_per_month"]))
    return out


def _compare(config: StackConfig, costs: list[tuple[str, float, float]]) -> None:
    compute = sum(c for _, c, _ in costs)
    storage = sum(s for _, _, s in costs)
    volume = sum(s for typ, _, s in costs if typ == VOLUME)
    assert compute > 0
    assert pricing.compute_per_hour(config) == pytest.approx(compute, abs=1e-9)
    assert pricing.storage_per_month(config) == pytest.approx(storage, abs=1e-9)
    assert pricing.volume_per_month(config) == pytest.approx(volume, abs=1e-9)
    assert pricing.cost_per_hour(config) == pytest.approx(
        round(compute + storage / HOURS_PER_MONTH, 2), abs=1e-9
    )
    assert pricing.burn_per_hour(config) == pytest.approx(compute + storage / HOURS_PER_MONTH, abs=1e-9)


@pytest.mark.parametrize("stack", files.stack_names())
@pulumi.runtime.test
def test_the_price_is_the_sum_of_the_providers_check_costs(
    fake: FakeProviders, stack: str
) -> pulumi.Output[None]:
    config = files.load(stack)
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    cluster = H100Cluster(stack, H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))
    return cluster.nodes.apply(lambda _: _compare(config, _checked_costs(fake)))


def test_spot_and_auto_count_the_dearer_of_bid_and_on_demand() -> None:
    search = files.load("search")  # auto, bid 2.49 < on-demand 3.99
    assert pricing.gpu_hour_price(search) == pytest.approx(3.99)
    assert pricing.spot_compute_per_hour(search) == pytest.approx(32 * 2.49)
    assert pricing.on_demand_compute_per_hour(search) == pytest.approx(32 * 3.99)
    assert pricing.spot_compute_per_hour(files.load("prod")) is None
