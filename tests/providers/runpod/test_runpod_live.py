"""The RunPod providers' real verbs over real HTTP against the local RunPod emulator (`local_runpod`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.local import LocalRunPod
from providers.runpod import catalog, errors
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.pod import PodProvider
from providers.runpod.secret import SecretProvider
from providers.runpod.volume import NetworkVolumeProvider

pytestmark = pytest.mark.services

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def runpod(local_runpod: LocalRunPod, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalRunPod]:
    for key, value in {
        **local_runpod.env(),
        "TRAINSTACK_POLL_INTERVAL_S": "0.2",
        "RUNPOD_RATE_LIMIT_PER_MIN": "100000",
        "TRAINSTACK_READY_TIMEOUT_S": "60",
    }.items():
        monkeypatch.setenv(key, value)
    local_runpod.admin.reset()
    catalog.reset_cache()
    yield local_runpod
    local_runpod.admin.faults()
    local_runpod.admin.reset()
    catalog.reset_cache()


def _checked(provider: Any, inputs: dict[str, Any], olds: dict[str, Any] | None = None) -> dict[str, Any]:
    result = provider.check(olds or {}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return dict(result.inputs)


POD = {"name": "live-pod", "image": "runpod/pytorch:2", "gpu_type_id": H100, "gpu_count": 1.0}


def test_pod_full_lifecycle(runpod: LocalRunPod) -> None:
    provider = PodProvider()
    checked = _checked(provider, POD)
    assert checked["price_source"] == "catalog" and checked["cost_per_hour"] > 0
    created = provider.create(checked)
    outs = created.outs or {}
    assert outs["status"] == "RUNNING" and outs["ssh_host"] and outs["ssh_port"]
    assert provider.read(created.id, outs).id == created.id
    news = _checked(provider, {**POD, "image": "runpod/pytorch:3", "env": {"X": "1"}})
    assert provider.diff(created.id, outs, news).replaces == []
    updated = provider.update(created.id, outs, news).outs or {}
    assert updated["image"] == "runpod/pytorch:3" and updated["status"] == "RUNNING"
    provider.delete(created.id, updated)
    assert provider.read(created.id, updated).id is None
    provider.delete(created.id, updated)


def _pod_billed(runpod: LocalRunPod, pod_id: str) -> dict[str, float]:
    with runpod.client() as api:
        data = api.get("/v2/billing/pods", params={"podId": pod_id, "bucketSize": "day"}).json()
    return dict(data["metadata"]["totals"])


def test_pod_declared_stopped_is_stopped_then_started_again_by_updates(runpod: LocalRunPod) -> None:
    provider = PodProvider()
    running = _checked(provider, POD)
    created = provider.create(running)
    outs = created.outs or {}
    assert outs["boots"] == 0
    stopped_in = _checked(provider, {**POD, "desired_status": "EXITED"}, olds=running)
    # Stopped, a pod costs nothing per hour (no volume disk: it mounts a network volume or nothing).
    assert stopped_in["cost_per_hour"] == 0 and stopped_in["storage_cost_per_month"] == 0
    diff = provider.diff(created.id, outs, stopped_in)
    assert diff.changes and diff.replaces == []
    stopped = provider.update(created.id, outs, stopped_in).outs or {}
    assert stopped["status"] == "EXITED" and stopped["ssh_host"] is None and stopped["boots"] == 0
    assert [p["id"] for p in runpod.admin.live()["pods"]] == [created.id]  # the same pod, kept
    # Stopped as declared: a refresh and a diff find nothing to do (no replace of a halted pod).
    refreshed = provider.read(created.id, stopped).outs or {}
    assert refreshed["status"] == "EXITED"
    assert not provider.diff(created.id, refreshed, stopped_in).changes
    # RunPod bills the stopped pod no GPU (and, without a volume disk, nothing at all).
    billed = _pod_billed(runpod, created.id)
    runpod.admin.advance(5 * 3600)
    assert _pod_billed(runpod, created.id)["totalAmount"] == pytest.approx(billed["totalAmount"], abs=1e-6)

    again_in = _checked(provider, POD, olds=stopped_in)
    diff = provider.diff(created.id, refreshed, again_in)
    assert diff.changes and diff.replaces == []  # started, not rented again
    again = provider.update(created.id, refreshed, again_in).outs or {}
    assert again["status"] == "RUNNING" and again["ssh_host"] and again["boots"] == 1
    assert again["pod_id"] == created.id
    runpod.admin.advance(3600)
    assert _pod_billed(runpod, created.id)["gpuAmount"] > billed["gpuAmount"]  # billing again
    provider.delete(created.id, again)


def test_a_pod_never_created_cannot_be_declared_stopped(runpod: LocalRunPod) -> None:
    provider = PodProvider()
    result = provider.check({}, {**POD, "desired_status": "EXITED"})
    assert [f.property for f in result.failures] == ["desired_status"]
    assert "nothing to stop" in result.failures[0].reason and "run.phase active" in result.failures[0].reason
    spot = provider.check({}, {**POD, "capacity": "spot", "bid_per_gpu": 1.0, "desired_status": "EXITED"})
    assert any("on-demand" in f.reason for f in spot.failures), spot.failures
    assert runpod.admin.live()["pods"] == []


def test_pod_lost_create_response_leaves_no_duplicate(runpod: LocalRunPod) -> None:
    runpod.admin.faults(loseNext=1, matchMethod="POST", matchPath="/v2/pods")
    provider = PodProvider()
    created = provider.create(_checked(provider, POD))
    assert not any(runpod.admin.live()["duplicates"].values())
    assert [p["id"] for p in runpod.admin.live()["pods"]] == [created.id]


def test_pod_survives_server_errors_on_reads(runpod: LocalRunPod) -> None:
    runpod.admin.faults(errorNext=3, matchMethod="GET", matchPath="/v2/pods")
    provider = PodProvider()
    assert (provider.create(_checked(provider, POD)).outs or {})["status"] == "RUNNING"


def test_spot_refused_and_auto_fallback(runpod: LocalRunPod) -> None:
    # Spot is GraphQL's alone (podRentInterruptable): this is the path while it still answers; with it gone,
    # check() refuses spot first (tests/providers/runpod/test_graphql_retired.py).
    runpod.admin.limits(offerSpot=False, graphql="on")
    provider = PodProvider()
    with pytest.raises(errors.SpotRefusedError, match="capacity: on_demand"):
        provider.create(_checked(provider, {**POD, "capacity": "spot", "bid_per_gpu": 3.0}))
    outs = provider.create(_checked(provider, {**POD, "capacity": "auto", "bid_per_gpu": 3.0})).outs or {}
    assert outs["capacity_obtained"] == "on_demand"
    assert len(runpod.admin.live()["pods"]) == 1


def test_no_capacity_is_a_clear_error_and_nothing_is_left(runpod: LocalRunPod) -> None:
    runpod.admin.capacity(exhaustNext=1)
    provider = PodProvider()
    with pytest.raises(errors.NoCapacityError, match="another data center"):
        provider.create(_checked(provider, POD))
    assert runpod.admin.live()["pods"] == []


def test_cluster_lifecycle(runpod: LocalRunPod) -> None:
    runpod.admin.limits(spendLimit=1000)
    provider = InstantClusterProvider()
    inputs = {
        "name": "live-cluster",
        "image": "img",
        "gpu_type_id": H100,
        "gpu_count_per_pod": 8.0,
        "pod_count": 2.0,
    }
    created = provider.create(_checked(provider, inputs))
    outs = created.outs or {}
    assert [n["rank"] for n in outs["nodes"]] == [0, 1]
    assert all(n["ip"] and n["ssh_port"] for n in outs["nodes"]) and outs["network_cidr"]
    renamed = _checked(provider, {**inputs, "name": "live-cluster-2"})
    assert (provider.update(created.id, outs, renamed).outs or {})["name"] == "live-cluster-2"
    provider.delete(created.id, outs)
    assert provider.read(created.id, outs).id is None


def test_volume_grows_and_never_shrinks(runpod: LocalRunPod) -> None:
    provider = NetworkVolumeProvider()
    inputs = {"name": "live-vol", "size_gb": 100.0, "data_center_id": "US-TX-3"}
    created = provider.create(_checked(provider, inputs))
    outs = created.outs or {}
    bigger = _checked(provider, {**inputs, "size_gb": 200}, outs)
    grown = provider.update(created.id, outs, bigger).outs or {}
    assert (provider.read(created.id, grown).outs or {})["size_gb"] == 200
    assert provider.check(grown, {**inputs, "size_gb": 150}).failures[0].property == "size_gb"
    provider.delete(created.id, grown)
    assert provider.read(created.id, grown).id is None


def test_secret_lifecycle(runpod: LocalRunPod) -> None:
    # RunPod's secret store is GraphQL's: an older stack's runpod:Secret while GraphQL answers (issue #67).
    runpod.admin.limits(graphql="on")
    provider = SecretProvider()
    inputs = {"name": "LIVE_TOKEN", "value": "live-secret-value"}
    created = provider.create(_checked(provider, inputs))
    outs = created.outs or {}
    assert outs["reference"] == "{{ RUNPOD_SECRET_LIVE_TOKEN }}" and "value" not in outs
    rotated = _checked(provider, {**inputs, "value": "rotated"})
    assert provider.diff(created.id, outs, rotated).changes
    outs = provider.update(created.id, outs, rotated).outs or {}
    assert provider.read(created.id, outs).id == created.id
    provider.delete(created.id, outs)
    assert provider.read(created.id, outs).id is None
    provider.delete(created.id, outs)
