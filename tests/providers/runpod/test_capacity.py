"""RunPod's stock at preview (providers/runpod/capacity.py): the typed read, its failures, one request per
process, the choice of a data center, and the cluster create's fallback along the ordered candidates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from providers.runpod import capacity, catalog, errors
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.pod import PodProvider
from providers.runpod.volume import NetworkVolumeProvider
from tests.providers.runpod.fake_runpod import NO_CAPACITY, FakeRunPod, Fault

H100 = "NVIDIA H100 80GB HBM3"
STOCK_PATH = f"/v2/catalog/gpus/{H100}"
QUERY = capacity.CapacityQuery(H100, 8, "CLUSTER", "SECURE")
CLUSTER = {"name": "train", "image": "img", "gpu_type_id": H100, "gpu_count_per_pod": 8.0, "pod_count": 8.0}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "10")
    catalog.reset_cache()
    yield
    catalog.reset_cache()


def _answering(status: int, payload: Any) -> FakeRunPod:
    """A fake whose stock endpoint answers `payload` (a JSON value, or raw text when a str)."""
    fake = FakeRunPod()
    route = fake.route

    def answer(method: str, path: str, body: Any) -> httpx.Response:
        if path == STOCK_PATH:
            if isinstance(payload, str):
                return httpx.Response(status, text=payload)
            return httpx.Response(status, json=payload)
        return route(method, path, body)

    fake.route = answer  # type: ignore[method-assign]
    return fake


# ---- the read ---------------------------------------------------------------------------------------


def test_the_read_asks_v2_for_the_product_count_and_cloud_and_keeps_runpods_levels() -> None:
    fake = FakeRunPod()
    seen: list[httpx.Request] = []
    handle = fake.handle

    def spy(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handle(request)

    fake.handle = spy  # type: ignore[method-assign]
    read = capacity.read_capacity(fake.factory(), QUERY)
    assert read.error is None
    assert read.levels == (("US-TX-3", "HIGH"), ("EU-RO-1", "LOW"), ("US-KS-2", "MEDIUM"))
    params = dict(seen[0].url.params)
    assert params == {"include": "AVAILABILITY", "product": "CLUSTER", "count": "8", "cloud": "SECURE"}
    assert read.level("EU-RO-1") == "LOW" and read.level("CA-MTL-1") == "NONE"  # not listed: none free


def test_an_answer_without_data_centers_means_none_free_anywhere() -> None:
    # RunPod: `dataCenters` is "omitted entirely when the configuration is unavailable everywhere".
    fake = _answering(200, {"id": H100, "name": "H100 SXM", "availability": "NONE"})
    read = capacity.read_capacity(fake.factory(), QUERY)
    assert read.error is None and read.levels == ()
    assert capacity.choose(["EU-RO-1", "US-TX-3"], read) == "EU-RO-1"  # nothing better: RunPod decides


@pytest.mark.parametrize(
    ("status", "payload", "said"),
    [
        (200, {"id": H100, "dataCenters": [{"id": "US-TX-3", "availability": "PLENTY"}]}, "availability"),
        (200, {"gpus": []}, "id"),
        (200, "<html>down for maintenance</html>", "not JSON"),
        (200, {"id": "NVIDIA B200", "dataCenters": []}, "answered for 'NVIDIA B200'"),
        (503, {"title": "Unavailable", "status": 503, "detail": "x"}, "ServerError"),
        (403, {"title": "Forbidden", "status": 403, "detail": "x"}, "AuthError"),
    ],
    ids=["bad-level", "not-a-gpu-type", "not-json", "other-gpu", "server-error", "forbidden"],
)
def test_a_bad_answer_is_a_clear_reason_not_a_crash(status: int, payload: Any, said: str) -> None:
    read = capacity.read_capacity(_answering(status, payload).factory(), QUERY)
    assert read.error is not None and said in read.error
    assert "maintenance" not in read.error  # never the body
    assert read.levels == () and read.level("US-TX-3") is None
    assert capacity.choose(["EU-RO-1", "US-TX-3"], read) == "EU-RO-1"  # the stack's own order


def test_no_api_key_is_said_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)

    def no_key() -> Any:
        raise errors.RunPodSettingsError("no key")

    read = capacity.read_capacity(no_key, QUERY)
    assert read.error == "no RunPod API key in the provider environment"


def test_a_preview_of_many_pods_and_a_volume_spends_one_request() -> None:
    fake = FakeRunPod()
    pods = PodProvider(fake.factory())
    pod = {"name": "p", "image": "img", "gpu_type_id": H100, "gpu_count": 8.0, "ports": ["22/tcp"]}
    for i in range(4):
        result = pods.check({}, {**pod, "name": f"p{i}", "data_center_ids": ["EU-RO-1", "US-TX-3"]})
        assert result.failures == []
        stock = result.inputs["availability"]
        assert stock["data_centers"] == [
            {"id": "EU-RO-1", "availability": "LOW"},
            {"id": "US-TX-3", "availability": "HIGH"},
        ]
        assert result.inputs["capacity"] == "on_demand"  # the pod's own input is untouched
    placement = {"candidates": ["EU-RO-1", "US-TX-3"], "gpu_type_id": H100, "gpu_count": 8, "product": "POD"}
    volume = NetworkVolumeProvider(fake.factory()).check(
        {}, {"name": "v", "size_gb": 10, "placement": placement}
    )
    assert volume.failures == [] and volume.inputs["data_center_id"] == "EU-RO-1"
    assert fake.count("GET", STOCK_PATH) == 1


def test_an_unknown_gpu_at_preview_reads_nothing() -> None:
    from providers.runpod.base import UNKNOWN

    fake = FakeRunPod()
    result = InstantClusterProvider(fake.factory()).check({}, {**CLUSTER, "gpu_type_id": UNKNOWN})
    assert result.inputs["availability"] is None
    assert fake.count("GET", STOCK_PATH) == 0


# ---- the choice ---------------------------------------------------------------------------------------


def _read(**levels: str) -> capacity.CapacityRead:
    return capacity.CapacityRead(QUERY, tuple((dc.replace("_", "-"), lvl) for dc, lvl in levels.items()))


def test_choose_takes_the_first_candidate_with_stock_and_keeps_where_the_stack_is() -> None:
    read = _read(EU_RO_1="NONE", US_TX_3="LOW", US_KS_2="HIGH")
    assert capacity.choose(["EU-RO-1", "US-TX-3", "US-KS-2"], read) == "US-TX-3"  # order beats level
    assert capacity.choose(["EU-RO-1", "US-TX-3"], read, kept="EU-RO-1") == "EU-RO-1"  # never moves itself
    assert capacity.choose(["US-TX-3"], read, kept="EU-RO-1") == "US-TX-3"  # kept one no longer listed
    assert capacity.choose([], read) is None
    assert capacity.choose(["EU-RO-1", "CA-MTL-1"], read) == "EU-RO-1"  # none free anywhere: first


def test_create_order_moves_the_empty_ones_last_and_drops_none() -> None:
    read = _read(EU_RO_1="NONE", US_TX_3="LOW", US_KS_2="NONE")
    assert capacity.create_order(["EU-RO-1", "US-KS-2", "US-TX-3"], read) == ["US-TX-3", "EU-RO-1", "US-KS-2"]
    assert capacity.create_order(["EU-RO-1", "US-TX-3"], None) == ["EU-RO-1", "US-TX-3"]


# ---- the volume commits, the cluster falls back --------------------------------------------------------


def _volume(fake: FakeRunPod, olds: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    plan = {"candidates": ["EU-RO-1", "US-TX-3"], "gpu_type_id": H100, "gpu_count": 8, "product": "CLUSTER"}
    result = NetworkVolumeProvider(fake.factory()).check(
        olds or {}, {"name": "v", "size_gb": 10, "placement": {**plan, **over}}
    )
    assert result.failures == []
    return dict(result.inputs)


def test_the_volume_commits_to_the_first_candidate_with_stock_and_stays_there() -> None:
    fake = FakeRunPod()
    fake.stock = {"EU-RO-1": "NONE", "US-TX-3": "LOW"}
    first = _volume(fake)
    assert first["data_center_id"] == "US-TX-3"
    capacity.reset_cache()
    fake.stock = {"EU-RO-1": "HIGH", "US-TX-3": "NONE"}  # stock moved; the volume (and its data) does not
    assert _volume(fake, olds=first)["data_center_id"] == "US-TX-3"
    diff = NetworkVolumeProvider(fake.factory()).diff("vol1", first, _volume(fake, olds=first, gpu_count=4))
    assert not diff.changes  # a new placement hint alone changes nothing


def test_a_cluster_falls_back_to_the_next_data_center_on_no_instances() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/clusters", Fault("status", 400, NO_CAPACITY))
    provider = InstantClusterProvider(fake.factory())
    inputs = provider.check({}, {**CLUSTER, "data_center_ids": ["EU-RO-1", "US-TX-3"]}).inputs
    outs = provider.create(inputs).outs or {}
    posted = [b["dataCenterIds"] for m, p, b in fake.bodies if (m, p) == ("POST", "/v2/clusters")]
    assert posted == [["EU-RO-1"], ["US-TX-3"]]
    assert outs["data_center_id"] == "US-TX-3" and len(fake.clusters) == 1


def test_a_cluster_tries_the_empty_ones_last_and_stops_on_any_other_error() -> None:
    fake = FakeRunPod()
    fake.stock = {"EU-RO-1": "NONE", "US-TX-3": "LOW"}
    provider = InstantClusterProvider(fake.factory())
    inputs = provider.check({}, {**CLUSTER, "data_center_ids": ["EU-RO-1", "US-TX-3"]}).inputs
    fake.fail("POST", "/v2/clusters", Fault("status", 422, "bad"))
    with pytest.raises(errors.InvalidRequestError):
        provider.create(inputs)
    posted = [b["dataCenterIds"] for m, p, b in fake.bodies if (m, p) == ("POST", "/v2/clusters")]
    assert posted == [["US-TX-3"]]  # EU-RO-1 reads NONE: tried last; the 422 ends the loop
    assert fake.clusters == {}


def test_no_instances_anywhere_names_every_data_center_tried_and_leaves_nothing() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/clusters", *[Fault("status", 400, NO_CAPACITY)] * 2)
    provider = InstantClusterProvider(fake.factory())
    inputs = provider.check({}, {**CLUSTER, "data_center_ids": ["US-TX-3", "EU-RO-1"]}).inputs
    with pytest.raises(errors.NoCapacityError) as exc:
        provider.create(inputs)
    assert "in US-TX-3, EU-RO-1" in str(exc.value) and "trainstack:cluster.data_centers" in str(exc.value)
    assert fake.clusters == {}


def test_a_cluster_pinned_by_its_volume_does_not_move_and_says_why() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/clusters", Fault("status", 400, NO_CAPACITY))
    provider = InstantClusterProvider(fake.factory())
    pinned = {**CLUSTER, "data_center_id": "EU-RO-1", "data_center_ids": ["EU-RO-1", "US-TX-3"]}
    with pytest.raises(errors.NoCapacityError) as exc:
        provider.create(provider.check({}, pinned).inputs)
    assert "pinned there by its network volume" in str(exc.value)
    assert fake.count("POST", "/v2/clusters") == 1


def test_a_placed_cluster_moves_only_when_its_data_center_leaves_the_list() -> None:
    provider = InstantClusterProvider(FakeRunPod().factory())
    created = provider.check({}, {**CLUSTER, "data_center_ids": ["EU-RO-1", "US-TX-3"]}).inputs
    placed = {**created, "data_center_id": "US-TX-3"}  # the outputs: where create landed it
    # An update's check is given the previous inputs (they keep its owner id, facts/pods.py OWNER_ID_ENV).
    reordered = provider.check(created, {**CLUSTER, "data_center_ids": ["US-TX-3", "EU-RO-1"]}).inputs
    assert provider.diff("cl1", placed, reordered).replaces == []
    dropped = provider.check(created, {**CLUSTER, "data_center_ids": ["EU-RO-1", "US-KS-2"]}).inputs
    assert provider.diff("cl1", placed, dropped).replaces == ["data_center_ids"]


def test_a_candidate_the_catalog_does_not_list_is_refused_with_the_choices() -> None:
    plan = {"candidates": ["EU-RO-1", "XX-NOPE-9"], "gpu_type_id": H100, "gpu_count": 8, "product": "CLUSTER"}
    result = NetworkVolumeProvider(FakeRunPod().factory()).check(
        {}, {"name": "v", "size_gb": 10, "placement": plan}
    )
    (failure,) = result.failures
    assert failure.property == "placement.candidates"
    assert "XX-NOPE-9" in failure.reason and "EU-RO-1, US-KS-2, US-TX-3" in failure.reason
