"""Pods over real HTTP: lifecycle on the injected clock, actions, patch, validation and auth."""

from __future__ import annotations

import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import H100, pod_body

pytestmark = pytest.mark.services


def test_create_reports_catalog_cost_and_injected_env(api: httpx.Client) -> None:
    response = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 2}, env={"A": "1"}))
    assert response.status_code == 201
    pod = response.json()
    assert pod["cost"] == 7.98  # 2 x $3.99 secure, from the dated snapshot
    assert pod["status"] == "PROVISIONING" and pod["runtime"] is None
    assert pod["env"]["A"] == "1"
    assert pod["env"]["RUNPOD_POD_ID"] == pod["id"]
    assert pod["env"]["RUNPOD_DC_ID"] == pod["dataCenterId"]
    assert {"RUNPOD_PUBLIC_IP", "RUNPOD_TCP_PORT_22"} <= pod["env"].keys()


def test_community_price(api: httpx.Client) -> None:
    pod = api.post("/v2/pods", json=pod_body(cloud="COMMUNITY")).json()
    assert pod["cost"] == 2.69


def test_status_moves_on_the_clock_and_runtime_lags(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    rp.admin.advance(10)  # provisioning_s
    assert api.get(f"/v2/pods/{pod_id}").json()["status"] == "STARTING"
    rp.admin.advance(5)  # starting_s
    pod = api.get(f"/v2/pods/{pod_id}").json()
    assert pod["status"] == "RUNNING" and pod["runtime"] is None and pod["ssh"]["direct"] is None
    rp.admin.advance(3)  # runtime_lag_s
    pod = api.get(f"/v2/pods/{pod_id}").json()
    ssh_port = next(p for p in pod["runtime"]["ports"] if p["private"] == 22)
    assert ssh_port["public"] == int(pod["env"]["RUNPOD_TCP_PORT_22"])
    assert pod["ssh"]["direct"]["port"] == ssh_port["public"]
    assert pod["startedAt"] is not None


def test_list_get_patch_delete(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    assert [p["id"] for p in api.get("/v2/pods").json()["pods"]] == [pod_id]
    rp.admin.advance(20)
    patched = api.patch(f"/v2/pods/{pod_id}", json={"name": "renamed", "env": {"B": "2"}}).json()
    assert patched["name"] == "renamed" and patched["env"]["B"] == "2" and "A" not in patched["env"]
    assert patched["status"] == "STARTING"  # an env edit resets the running container
    assert api.delete(f"/v2/pods/{pod_id}").status_code == 204
    assert api.get(f"/v2/pods/{pod_id}").status_code == 404
    assert api.delete(f"/v2/pods/{pod_id}").status_code == 404


def test_actions_follow_status(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    refused = api.post(f"/v2/pods/{pod_id}/action", json={"action": "restart"})
    assert refused.status_code == 409 and refused.headers["content-type"] == "application/problem+json"
    stopped = api.post(f"/v2/pods/{pod_id}/action", json={"action": "stop"}).json()
    assert (
        stopped["status"] == "EXITED"
        and stopped["cost"] == 0
        and stopped["actions"] == ["start", "terminate"]
    )
    assert api.post(f"/v2/pods/{pod_id}/action", json={"action": "stop"}).status_code == 409
    started = api.post(f"/v2/pods/{pod_id}/action", json={"action": "start"}).json()
    assert started["status"] == "PROVISIONING"
    rp.admin.advance(15)
    restarted = api.post(f"/v2/pods/{pod_id}/action", json={"action": "restart"}).json()
    assert restarted["status"] == "STARTING"
    assert api.post(f"/v2/pods/{pod_id}/action", json={"action": "terminate"}).status_code == 204
    assert api.get(f"/v2/pods/{pod_id}").status_code == 404


def test_global_networking_ip_and_dns(rp: LocalRunPod, api: httpx.Client) -> None:
    pod = api.post("/v2/pods", json=pod_body(globalNetworking=True)).json()
    assert pod["globalNetworking"]["enabled"] is True
    assert pod["globalNetworking"]["internalDns"] == f"{pod['id']}.runpod.internal"
    assert pod["globalNetworking"]["ip"]
    refused = api.post("/v2/pods", json=pod_body(globalNetworking=True, dataCenterIds=["CA-MTL-1"]))
    assert refused.status_code == 400 and "Global networking" in refused.json()["detail"]


def test_global_networking_patch_applies_at_restart(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    rp.admin.advance(20)
    assert api.patch(f"/v2/pods/{pod_id}", json={"globalNetworking": True}).json()["globalNetworking"] == {
        "enabled": False
    }
    after = api.post(f"/v2/pods/{pod_id}/action", json={"action": "restart"}).json()
    assert after["globalNetworking"]["enabled"] is True


def test_unknown_field_is_422_problem(api: httpx.Client) -> None:
    response = api.post("/v2/pods", json=pod_body(tags={"team": "ml"}))
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert {"title", "status", "detail", "errors"} <= problem.keys() and problem["status"] == 422
    assert problem["errors"] == ["/: unknown field(s) 'tags'"]


def test_rule_violations_are_400(api: httpx.Client) -> None:
    no_compute = api.post("/v2/pods", json={"name": "x", "image": "i"})
    assert no_compute.status_code == 400 and "exactly one" in no_compute.json()["detail"]
    unknown_gpu = api.post("/v2/pods", json=pod_body(gpu={"id": "NVIDIA Z9000"}))
    assert unknown_gpu.status_code == 400 and "catalog" in unknown_gpu.json()["detail"]
    too_many = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 9}))
    assert too_many.status_code == 400


def test_invalid_image_references_are_refused_as_runpod_would(api: httpx.Client) -> None:
    for image in ("runpod/pytorch:2.4.0 ;reboot", "runpod/pytorch:", "RunPod/pytorch:1", "a//b:1", ""):
        response = api.post("/v2/pods", json=pod_body(image=image))
        assert response.status_code == 400, image
        assert response.json()["errors"] == ["$.image: not a valid container image reference"]
    assert api.get("/v2/pods").json()["pods"] == []
    for image in ("localhost:5000/team/img:v1", "ghcr.io/org/img@sha256:" + "a" * 64):
        assert api.post("/v2/pods", json=pod_body(image=image)).status_code == 201, image
