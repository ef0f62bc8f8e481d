"""Rules the v2 spec states in its description text rather than its schema (issue #20, defect 3).

Each test quotes the text it enforces; emulator/README.md lists them all. Every one of these requests was
accepted (or ignored) by the emulator before.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from emulator.problems import NO_CAPACITY
from harness.local import LocalRunPod
from tests.emulator.conftest import H100, pod_body

pytestmark = pytest.mark.services

PERSISTENT = {"size": 20, "path": "/data"}


def _volume(api: httpx.Client, dc: str = "US-TX-3") -> str:
    made = api.post("/v2/network-volumes", json={"name": "vol", "size": 10, "dataCenter": dc})
    volume_id: str = made.json()["id"]
    return volume_id


def _network(volume_id: str, path: str = "/workspace") -> dict[str, Any]:
    return {"network": [{"volumeId": volume_id, "path": path}]}


def test_persistent_and_network_together_is_400(rp: LocalRunPod, api: httpx.Client) -> None:
    """Mounts: "At-most-one of `persistent` or `network` ... enforced at the handler with 400"."""
    both = {"persistent": PERSISTENT} | _network(_volume(api))
    answer = api.post("/v2/pods", json=pod_body(mounts=both))
    assert answer.status_code == 400 and "at most one" in answer.json()["detail"]
    assert rp.admin.live()["pods"] == []


def test_patch_mounts_follows_the_mounts_description(api: httpx.Client) -> None:
    volume = _volume(api)
    net_pod = api.post("/v2/pods", json=pod_body("net", mounts=_network(volume))).json()["id"]
    # "the mount `path` may be changed via PATCH"
    moved = api.patch(f"/v2/pods/{net_pod}", json={"mounts": _network(volume, "/data")})
    assert moved.status_code == 200 and moved.json()["mounts"]["network"][0]["path"] == "/data"
    # "Omitting `mounts` or sending `{}` leaves the existing mount unchanged."
    same = api.patch(f"/v2/pods/{net_pod}", json={"mounts": {}})
    assert same.status_code == 200 and same.json()["mounts"]["network"][0]["path"] == "/data"
    # "An explicit `network: []` is rejected with 400 (clearing mounts is not supported)."
    assert api.patch(f"/v2/pods/{net_pod}", json={"mounts": {"network": []}}).status_code == 400
    # "The `volumeId` of a network mount is immutable"
    other = _volume(api)
    assert api.patch(f"/v2/pods/{net_pod}", json={"mounts": _network(other)}).status_code == 400
    # "Mount kind is fixed at create — ... persistent on a network pod, network on a persistent pod,
    # or any mount on a previously-mountless pod"
    assert api.patch(f"/v2/pods/{net_pod}", json={"mounts": {"persistent": PERSISTENT}}).status_code == 400
    disk_pod = api.post("/v2/pods", json=pod_body("disk", mounts={"persistent": PERSISTENT})).json()["id"]
    assert api.patch(f"/v2/pods/{disk_pod}", json={"mounts": _network(volume)}).status_code == 400
    bigger = api.patch(f"/v2/pods/{disk_pod}", json={"mounts": {"persistent": {"size": 30, "path": "/d2"}}})
    assert bigger.status_code == 200 and bigger.json()["mounts"]["persistent"] == {"size": 30, "path": "/d2"}
    bare = api.post("/v2/pods", json=pod_body("bare")).json()["id"]
    assert api.patch(f"/v2/pods/{bare}", json={"mounts": {"persistent": PERSISTENT}}).status_code == 400
    assert api.patch(f"/v2/pods/{bare}", json={"mounts": _network(volume)}).status_code == 400
    # "Missing required fields → 422."
    partial = api.patch(f"/v2/pods/{net_pod}", json={"mounts": {"network": [{"volumeId": volume}]}})
    assert partial.status_code == 422


def test_allowed_cuda_versions_with_a_floor_is_400(api: httpx.Client) -> None:
    """CreateGpuConfig: "A non-empty set is mutually exclusive with minCudaVersion (400 if both are
    sent). An explicit `[]` states no constraint, so it may accompany a floor.\""""
    both = {"id": H100, "allowedCudaVersions": ["12.8"], "minCudaVersion": "12.4"}
    assert api.post("/v2/pods", json=pod_body(gpu=both)).status_code == 400
    empty_set = {"id": H100, "allowedCudaVersions": [], "minCudaVersion": "12.4"}
    assert api.post("/v2/pods", json=pod_body(gpu=empty_set)).status_code == 201


def test_a_cuda_version_no_machine_has_is_a_capacity_error(api: httpx.Client) -> None:
    """allowedCudaVersions: "Matching is exact, so a version no machine reports yields a capacity error
    rather than a fallback"."""
    answer = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "allowedCudaVersions": ["11.8"]}))
    assert answer.status_code == 400 and answer.json()["detail"] == NO_CAPACITY
    exact = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "allowedCudaVersions": ["12.6"]}))
    assert exact.status_code == 201 and exact.json()["cudaVersion"] == "12.6"
    assert exact.json()["dataCenterId"] in ("US-KS-2", "EU-RO-1")  # the data centers with 12.6 machines


def test_min_cuda_version_places_at_or_above_the_floor_numerically(api: httpx.Client) -> None:
    """minCudaVersion: "compared numerically rather than as a decimal — so 12.11 is above 12.2"."""
    # EU-RO-1's machines report 12.4 and 12.6: a 12.8 floor cannot be placed there.
    refused = api.post(
        "/v2/pods", json=pod_body(gpu={"id": H100, "minCudaVersion": "12.8"}, dataCenterIds=["EU-RO-1"])
    )
    assert refused.status_code == 400 and refused.json()["detail"] == NO_CAPACITY
    placed = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "minCudaVersion": "12.8"})).json()
    assert placed["cudaVersion"] in ("12.8", "13.0")
    # As a decimal 12.10 would read below 12.6; numerically it is above every 12.x machine here.
    above = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "minCudaVersion": "12.10"})).json()
    assert above["cudaVersion"] == "13.0"


def _gpu(api: httpx.Client, **params: str) -> httpx.Response:
    return api.get(f"/v2/catalog/gpus/{H100}", params=params)


def test_catalog_cuda_filters_are_applied(api: httpx.Client) -> None:
    """listGpuTypes cudaVersions: "Also narrows the returned cudaVersions array"; minCudaVersion: "a bare
    major is accepted here and means any release of that major"; availability is scoped by them."""
    base = {"include": "AVAILABILITY", "product": "POD"}
    everything = [v["version"] for v in _gpu(api, **base).json()["cudaVersions"]]
    assert everything == ["12.4", "12.6", "12.8", "13.0"]
    exact = _gpu(api, **base, cudaVersions="12.6").json()
    assert [v["version"] for v in exact["cudaVersions"]] == ["12.6"]
    assert {d["id"] for d in exact["dataCenters"]} == {"US-KS-2", "EU-RO-1"}
    floor = _gpu(api, **base, minCudaVersion="12.7").json()
    assert [v["version"] for v in floor["cudaVersions"]] == ["12.8", "13.0"]
    assert [v["version"] for v in _gpu(api, **base, minCudaVersion="13").json()["cudaVersions"]] == ["13.0"]
    nothing = _gpu(api, **base, cudaVersions="11.8").json()
    assert "cudaVersions" not in nothing and "dataCenters" not in nothing


def test_catalog_parameter_rules_are_400(api: httpx.Client) -> None:
    """ "Required with include=AVAILABILITY, and valid only with it (400 either way)"; "mutually exclusive
    with minCudaVersion (400 if both are sent)"; count/cloud/countryCodes "Valid only with
    include=AVAILABILITY"."""
    assert _gpu(api, include="AVAILABILITY").status_code == 400
    assert _gpu(api, product="POD").status_code == 400
    assert _gpu(api, cudaVersions="12.8").status_code == 400
    assert api.get("/v2/catalog/gpus", params={"countryCodes": "US"}).status_code == 400
    both = {"include": "AVAILABILITY", "product": "POD", "cudaVersions": "12.8", "minCudaVersion": "12"}
    assert _gpu(api, **both).status_code == 400
    assert _gpu(api, include="AVAILABILITY", product="POD", cudaVersions="12").status_code == 422  # malformed
