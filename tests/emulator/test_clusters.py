"""Instant Clusters: ranks, fabric IPs, injected env, rename, member protection, delete."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import cluster_body, pod_body

pytestmark = pytest.mark.services


def test_members_get_ranks_fabric_ips_and_env(rp: LocalRunPod, api: httpx.Client) -> None:
    created = api.post(
        "/v2/clusters",
        json=cluster_body()
        | {"compute": {"gpuTypeId": "NVIDIA H100 80GB HBM3", "gpuCountPerPod": 4, "podCount": 3}},
    )
    assert created.status_code == 201, created.text
    cluster = created.json()
    assert cluster["pods"]["total"] == 3 and cluster["pods"]["byStatus"] == {"PROVISIONING": 3}
    network = ipaddress.ip_network(cluster["network"]["cidr"])
    members = api.get(f"/v2/clusters/{cluster['id']}/pods").json()["pods"]
    assert [m["cluster"]["rank"] for m in members] == [0, 1, 2]
    primary = members[0]
    assert cluster["primary"]["podId"] == primary["id"]
    for member in members:
        env, ip = member["env"], member["cluster"]["ip"]
        assert ipaddress.ip_address(ip) in network
        assert env["NODE_ADDR"] == ip and env["NODE_RANK"] == str(member["cluster"]["rank"])
        assert env["PRIMARY_ADDR"] == env["MASTER_ADDR"] == primary["cluster"]["ip"]
        assert env["PRIMARY_PORT"] == env["MASTER_PORT"]
        assert env["NUM_NODES"] == "3" and env["NUM_TRAINERS"] == "4" and env["WORLD_SIZE"] == "12"
        assert env["HOST_NODE_ADDR"].startswith(primary["cluster"]["ip"] + ":")
        assert env["RUNPOD_POD_ID"] == member["id"] and env["RUNPOD_DC_ID"] == cluster["dataCenterId"]
        assert member["dataCenterId"] == cluster["dataCenterId"]
    rp.admin.advance(18)
    ready = api.get(f"/v2/clusters/{cluster['id']}").json()
    assert ready["pods"]["byStatus"] == {"RUNNING": 3} and ":" in ready["primary"]["sshEndpoint"]


def test_members_hidden_from_pod_list_and_protected(api: httpx.Client) -> None:
    cluster = api.post("/v2/clusters", json=cluster_body()).json()
    member_id = cluster["primary"]["podId"]
    assert api.get("/v2/pods").json()["pods"] == []
    listed = api.get("/v2/pods", params={"includeClusterPods": "true"}).json()["pods"]
    assert len(listed) == 2 and all(p["cluster"]["id"] == cluster["id"] for p in listed)
    assert api.patch(f"/v2/pods/{member_id}", json={"name": "x"}).status_code == 409
    refused = api.delete(f"/v2/pods/{member_id}")
    assert refused.status_code == 409 and cluster["id"] in refused.json()["detail"]


def test_rename_and_delete(rp: LocalRunPod, api: httpx.Client) -> None:
    cluster = api.post("/v2/clusters", json=cluster_body()).json()
    renamed = api.patch(f"/v2/clusters/{cluster['id']}", json={"name": "fleet-2"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "fleet-2"
    assert api.patch(f"/v2/clusters/{cluster['id']}", json={"podCount": 4}).status_code == 422
    assert api.delete(f"/v2/clusters/{cluster['id']}").status_code == 204
    assert api.get(f"/v2/clusters/{cluster['id']}").status_code == 404
    assert rp.admin.live()["pods"] == []


def test_cluster_needs_one_data_center_with_room(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.limits(spendLimit=10_000)
    big = cluster_body() | {
        "compute": {"gpuTypeId": "NVIDIA H100 80GB HBM3", "gpuCountPerPod": 8, "podCount": 17}
    }
    refused = api.post("/v2/clusters", json=big)  # 136 GPUs: more than any one data center holds
    assert refused.status_code == 400 and "no longer any instances" in refused.json()["detail"]


def test_member_volume_must_share_the_data_center(api: httpx.Client) -> None:
    volume = api.post(
        "/v2/network-volumes", json={"name": "ckpt", "size": 100, "dataCenter": "EU-RO-1"}
    ).json()
    mounts = {"network": [{"volumeId": volume["id"], "path": "/workspace"}]}
    refused = api.post("/v2/clusters", json=cluster_body(mounts=mounts, dataCenterIds=["US-TX-3"]))
    assert refused.status_code == 400 and "EU-RO-1" in refused.json()["detail"]
    placed = api.post("/v2/clusters", json=cluster_body(mounts=mounts)).json()
    assert placed["dataCenterId"] == "EU-RO-1"
    assert api.post("/v2/pods", json=pod_body(mounts=mounts, dataCenterIds=["US-KS-2"])).status_code == 400
