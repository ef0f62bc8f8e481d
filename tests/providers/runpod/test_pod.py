"""`runpod:Pod` provider verbs against the recording fake."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import dill
import pytest

from facts.pods import OWNER_ID_ENV
from providers.runpod import catalog, errors, spot
from providers.runpod.base import UNKNOWN
from providers.runpod.pod import PodProvider
from tests.providers.runpod.fake_runpod import API_KEY, FakeRunPod, Fault

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def _fresh_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "10")
    catalog.reset_cache()
    spot.forget()  # whether GraphQL answers is asked once a process
    yield
    catalog.reset_cache()
    spot.forget()


def _inputs(**over: Any) -> dict[str, Any]:
    base = {
        "name": "trainer",
        "image": "runpod/pytorch:2",
        "gpu_type_id": H100,
        "gpu_count": 8.0,
        "ports": ["22/tcp"],
        "env": {"A": "1"},
    }
    return {**base, **over}


def _checked(provider: PodProvider, **over: Any) -> dict[str, Any]:
    result = provider.check({}, _inputs(**over))
    assert result.failures == []
    return result.inputs


def test_check_names_each_bad_field_and_its_fix() -> None:
    provider = PodProvider(FakeRunPod().factory())
    result = provider.check({}, _inputs(gpu_count=0, ports=["22"], capacity="spot", bogus=1))
    props = {f.property for f in result.failures}
    assert {"gpu_count", "ports", "bogus"} <= props
    spot = provider.check({}, _inputs(capacity="spot"))
    assert [(f.property, "bid_per_gpu" in f.property) for f in spot.failures] == [("bid_per_gpu", True)]


def test_check_prices_from_the_live_catalog() -> None:
    inputs = _checked(PodProvider(FakeRunPod().factory()))
    assert inputs["cost_per_hour"] == pytest.approx(4.19 * 8)
    assert inputs["storage_cost_per_month"] == pytest.approx(50 * 0.10)
    assert inputs["price_source"] == "catalog"
    assert inputs["gpu_count"] == 8 and isinstance(inputs["gpu_count"], int)


def test_check_falls_back_to_the_dated_snapshot_when_the_api_is_down() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/catalog/gpus", *[Fault("connect")] * 50)
    inputs = _checked(PodProvider(fake.factory()), cloud="COMMUNITY")
    assert inputs["cost_per_hour"] == pytest.approx(2.69 * 8)
    assert inputs["price_source"].startswith("snapshot-2026-11-09")


def test_check_prices_spot_and_auto_at_the_dearer_of_bid_and_on_demand() -> None:
    """RunPod bills a spot pod its bid, and auto may fall back to on-demand: budgets count the dearer."""
    provider = PodProvider(FakeRunPod().factory())
    assert _checked(provider, capacity="spot", bid_per_gpu=2.0)["cost_per_hour"] == pytest.approx(4.19 * 8)
    assert _checked(provider, capacity="auto", bid_per_gpu=2.0)["cost_per_hour"] == pytest.approx(4.19 * 8)
    assert _checked(provider, capacity="spot", bid_per_gpu=4.19)["cost_per_hour"] == pytest.approx(4.19 * 8)


def test_check_refuses_a_bid_above_the_live_on_demand_price() -> None:
    provider = PodProvider(FakeRunPod().factory())
    for capacity in ("spot", "auto"):
        result = provider.check({}, _inputs(capacity=capacity, bid_per_gpu=4.6))
        assert [f.property for f in result.failures] == ["bid_per_gpu"]
        assert "above the on-demand $4.19 (catalog)" in result.failures[0].reason


def test_check_tolerates_unknown_values_at_preview() -> None:
    provider = PodProvider(FakeRunPod().factory())
    inputs = _checked(provider, volume_id=UNKNOWN)
    assert inputs["volume_id"] == UNKNOWN and inputs["cost_per_hour"] == pytest.approx(4.19 * 8)
    assert _checked(provider, gpu_count=UNKNOWN)["cost_per_hour"] == UNKNOWN


def test_create_waits_for_running_runtime_and_ssh_then_reports_outputs() -> None:
    fake = FakeRunPod(ready_after_gets=3)
    provider = PodProvider(fake.factory())
    result = provider.create(_checked(provider))
    outs = result.outs or {}
    assert outs["status"] == "RUNNING" and outs["ssh_host"] == "1.2.3.4" and outs["ssh_port"] > 40000
    assert outs["capacity_obtained"] == "on_demand" and outs["pod_id"] == result.id
    assert outs["cost_per_hour"] == pytest.approx(4.19 * 8)
    assert all(s >= 10 for s in fake.clock.sleeps)  # never polls faster than the interval


def test_ready_timeout_deletes_the_pod_so_create_stays_transactional() -> None:
    fake = FakeRunPod(ready_after_gets=10_000)
    provider = PodProvider(fake.factory())
    with pytest.raises(errors.DeadlineExceeded, match="ready_timeout_s"):
        provider.create(_checked(provider, ready_timeout_s=300))
    assert fake.pods == {}


def test_spot_refused_names_the_on_demand_alternative() -> None:
    fake = FakeRunPod()
    fake.spot_offered = False
    provider = PodProvider(fake.factory())
    with pytest.raises(errors.SpotRefusedError, match="capacity: on_demand") as info:
        provider.create(_checked(provider, capacity="spot", bid_per_gpu=2.0))
    assert "Interruptible" not in str(info.value) and fake.pods == {}


def test_auto_falls_back_to_on_demand_when_spot_is_refused() -> None:
    fake = FakeRunPod()
    fake.spot_offered = False
    provider = PodProvider(fake.factory())
    outs = provider.create(_checked(provider, capacity="auto", bid_per_gpu=2.0)).outs or {}
    assert outs["capacity_obtained"] == "on_demand" and fake.count("POST", "/v2/pods") == 1


def test_spot_when_offered_goes_through_graphql() -> None:
    fake = FakeRunPod()
    provider = PodProvider(fake.factory())
    outs = provider.create(_checked(provider, capacity="spot", bid_per_gpu=2.0)).outs or {}
    assert outs["capacity_obtained"] == "spot" and fake.count("POST", "/v2/pods") == 0
    rent = [b for m, p, b in fake.bodies if p == "/graphql" and "podRentInterruptable" in b["query"]]
    assert rent[0]["variables"]["input"]["bidPerGpu"] == 2.0


def test_diff_updates_in_place_or_replaces_by_field() -> None:
    fake = FakeRunPod()
    provider = PodProvider(fake.factory())
    olds = provider.create(_checked(provider)).outs or {}
    image = provider.diff("p", olds, _checked(provider, image="runpod/pytorch:3"))
    assert image.changes and image.replaces == []
    gpus = provider.diff("p", olds, _checked(provider, gpu_count=4))
    assert gpus.replaces == ["gpu_count"] and gpus.delete_before_replace
    assert not provider.diff("p", olds, _checked(provider)).changes


def test_update_patches_only_changed_fields_and_returns_full_outputs() -> None:
    fake = FakeRunPod()
    provider = PodProvider(fake.factory())
    created = provider.create(_checked(provider))
    olds = created.outs or {}
    news = provider.check(olds, _inputs(image="runpod/pytorch:3", env={"A": "2"})).inputs
    outs = provider.update(created.id, olds, news).outs or {}
    patch = [b for m, p, b in fake.bodies if m == "PATCH"]
    # The env PATCH keeps the owner id the create wrote (check keeps it from the previous inputs).
    owner_id = olds["env"][OWNER_ID_ENV]
    assert patch == [{"image": "runpod/pytorch:3", "env": {"A": "2", OWNER_ID_ENV: owner_id}}]
    assert outs["image"] == "runpod/pytorch:3" and outs["pod_id"] == created.id and outs["ssh_port"]


def test_read_drops_a_gone_pod_and_delete_of_a_gone_pod_succeeds() -> None:
    fake = FakeRunPod()
    provider = PodProvider(fake.factory())
    created = provider.create(_checked(provider))
    assert provider.read(created.id, created.outs or {}).id == created.id
    provider.delete(created.id, created.outs or {})
    gone = provider.read(created.id, created.outs or {})
    assert gone.id is None and gone.outs == {}
    provider.delete(created.id, created.outs or {})


def test_provider_pickles_without_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", API_KEY)
    blob = dill.dumps(PodProvider(), recurse=True)
    assert API_KEY.encode() not in blob
    assert isinstance(pickle.loads(pickle.dumps(PodProvider())), PodProvider)  # noqa: S301 -- our own bytes


def test_check_refuses_a_data_center_the_catalog_does_not_list() -> None:
    fake = FakeRunPod()
    result = PodProvider(fake.factory()).check({}, _inputs(data_center_ids=["US-TX-3", "US-XX-9"]))
    assert [f.property for f in result.failures] == ["data_center_ids"]
    assert "['US-XX-9'] not in RunPod's data center catalog" in result.failures[0].reason
    assert "EU-RO-1, US-KS-2, US-TX-3" in result.failures[0].reason
    assert _checked(PodProvider(fake.factory()), data_center_ids=["US-TX-3"])["data_center_ids"] == [
        "US-TX-3"
    ]
    assert fake.count("GET", "/v2/catalog/datacenters") == 1  # read once per process


def test_check_leaves_placement_to_runpod_when_the_catalog_is_unreadable() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/catalog/datacenters", *[Fault("connect")] * 50)
    assert _checked(PodProvider(fake.factory()), data_center_ids=["US-XX-9"])["data_center_ids"] == [
        "US-XX-9"
    ]


# Issue #34, class 2: a price the catalog lacks is the dearest known, never the bid and never 0.
MISSING_PRICES = [
    # (catalog prices (secure, community) by GPU, cloud, capacity, bid, expected $/GPU-h)
    ("no community price, auto at its bid", {H100: (4.19, 0.0)}, "COMMUNITY", "auto", 2.0, 4.19),
    ("no community price, spot", {H100: (4.19, 0.0)}, "COMMUNITY", "spot", 2.5, 4.19),
    ("no secure price, on-demand", {H100: (0.0, 2.79)}, "SECURE", "on_demand", None, 3.99),  # snapshot's
    ("GPU missing from the catalog", {"NVIDIA H100 PCIe": (2.0, 1.0)}, "SECURE", "on_demand", None, 3.99),
    ("the GPU listed with no prices", {H100: (0.0, 0.0)}, "COMMUNITY", "on_demand", None, 3.99),
]


@pytest.mark.parametrize(
    ("what", "prices", "cloud", "capacity", "bid", "per_gpu"),
    MISSING_PRICES,
    ids=[r[0] for r in MISSING_PRICES],
)
def test_a_missing_catalog_price_is_the_dearest_known(
    what: str,
    prices: dict[str, tuple[float, float]],
    cloud: str,
    capacity: str,
    bid: float | None,
    per_gpu: float,
) -> None:
    provider = PodProvider(FakeRunPod(gpu_prices=prices).factory())
    over: dict[str, Any] = {"cloud": cloud, "capacity": capacity}
    if bid is not None:
        over["bid_per_gpu"] = bid
    assert _checked(provider, **over)["cost_per_hour"] == pytest.approx(per_gpu * 8), what


def test_the_ownership_mark_alone_is_no_change_for_a_pod_made_before_it() -> None:
    """Adding TRAINSTACK_OWNER to a running pod's env would reset its container (a PATCH of env does)."""
    provider = PodProvider(FakeRunPod().factory())
    olds = provider.create(_checked(provider)).outs or {}  # env {"A": "1"}: made before the mark
    marked = _checked(provider, env={"A": "1", "TRAINSTACK_OWNER": "trainstack/dev"})
    assert not provider.diff("p", olds, marked).changes
    other = _checked(provider, env={"A": "2", "TRAINSTACK_OWNER": "trainstack/dev"})
    assert provider.diff("p", olds, other).changes  # a real change still is one (and carries the mark)
    olds_marked = provider.create(marked).outs or {}
    moved = _checked(provider, env={"A": "1", "TRAINSTACK_OWNER": "trainstack/prod"})
    assert provider.diff("p", olds_marked, moved).changes  # a mark that changes is a change


def test_a_pod_carries_an_owner_id_its_state_keeps() -> None:
    """Issue #62: the identity only the stack's own state holds: a random id check writes into the env of a
    pod it plans (recorded with the inputs, pending creates included), kept by every later check and sent
    with the create; never a diff of its own."""
    fake = FakeRunPod()
    provider = PodProvider(fake.factory())
    planned = _checked(provider)
    owner_id = planned["env"][OWNER_ID_ENV]
    assert len(owner_id) == 32 and owner_id != _checked(provider)["env"][OWNER_ID_ENV]  # one per stack's pod
    created = provider.create(planned)
    sent = [b for m, _p, b in fake.bodies if m == "POST" and "env" in (b or {})]
    assert sent and sent[-1]["env"][OWNER_ID_ENV] == owner_id
    again = provider.check(created.outs or {}, _inputs())
    assert again.inputs["env"][OWNER_ID_ENV] == owner_id
    made_before = {**(created.outs or {}), "env": {"A": "1"}}  # a pod made before the owner id existed
    assert not provider.diff(created.id, made_before, again.inputs).changes
