"""Catalog: prices from the dated snapshot, stock that falls as pods are placed, data center features."""

from __future__ import annotations

import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import H100, pod_body

pytestmark = pytest.mark.services


def test_gpu_prices(api: httpx.Client) -> None:
    gpus = {g["id"]: g for g in api.get("/v2/catalog/gpus").json()["gpus"]}
    assert gpus[H100]["price"] == {"secure": 3.99, "community": 2.69}
    assert gpus["NVIDIA H100 PCIe"]["price"] == {"secure": 2.89, "community": 1.99}
    assert gpus["NVIDIA H100 NVL"]["price"] == {"secure": 3.19, "community": 2.59}
    assert {"NVIDIA H200", "NVIDIA B200"} <= gpus.keys()
    assert "availability" not in gpus[H100]


def test_availability_tracks_placed_pods(api: httpx.Client) -> None:
    def level() -> str:
        gpu = api.get(f"/v2/catalog/gpus/{H100}", params={"include": "AVAILABILITY", "product": "POD"}).json()
        return next(d["availability"] for d in gpu["dataCenters"] if d["id"] == "CA-MTL-1")

    assert level() == "MEDIUM"  # 16 GPUs in stock
    api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 8}, dataCenterIds=["CA-MTL-1"]))
    api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 8}, dataCenterIds=["CA-MTL-1"]))
    assert level() == "NONE"


def test_stock_reads_as_the_admin_capacity_sets_it(rp: LocalRunPod, api: httpx.Client) -> None:
    """What the providers' capacity read sees: a data center emptied by the admin API reads NONE, and
    "exhausted for good" is no stock anywhere (as create then answers); the rest keep their levels."""
    query = {"include": "AVAILABILITY", "product": "CLUSTER", "count": "8", "cloud": "SECURE"}

    def levels() -> dict[str, str]:
        gpu = api.get(f"/v2/catalog/gpus/{H100}", params=query).json()
        return {d["id"]: d["availability"] for d in gpu.get("dataCenters", [])}

    rp.admin.capacity(stock={f"{H100}@EU-RO-1": 0})
    assert levels()["EU-RO-1"] == "NONE" and levels()["US-TX-3"] == "HIGH"
    rp.admin.capacity(exhausted=True)
    assert set(levels().values()) == {"NONE"}


def test_data_centers(api: httpx.Client) -> None:
    dcs = {d["id"]: d for d in api.get("/v2/catalog/datacenters").json()["dataCenters"]}
    assert {"US-TX-3", "US-KS-2", "EU-RO-1", "CA-MTL-1"} <= dcs.keys()
    assert (
        dcs["CA-MTL-1"]["globalNetwork"] is False
        and "HIGH_PERFORMANCE" in dcs["US-TX-3"]["networkVolumeTypes"]
    )
    europe = api.get("/v2/catalog/datacenters", params={"regions": "EUROPE", "include": "GPU_AVAILABILITY"})
    assert [d["id"] for d in europe.json()["dataCenters"]] == ["EU-RO-1"]
    assert europe.json()["dataCenters"][0]["gpuAvailability"]
    assert api.get("/v2/catalog/datacenters", params={"regions": "MOON"}).status_code == 422
    assert api.get("/v2/catalog/datacenters/NOPE").status_code == 404


def test_ssh_keys(api: httpx.Client) -> None:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG me@laptop"
    assert api.put("/v2/account/ssh-keys", json={"keys": [key]}).json() == {"keys": [key]}
    assert api.get("/v2/account/ssh-keys").json() == {"keys": [key]}
    assert api.put("/v2/account/ssh-keys", json={"keys": ["not a key"]}).status_code == 422
