"""Network volumes: CRUD, one data center, grow-only size, no delete while attached."""

from __future__ import annotations

import httpx
import pytest

from tests.emulator.conftest import pod_body

pytestmark = pytest.mark.services


def test_crud_and_grow_only(api: httpx.Client) -> None:
    created = api.post("/v2/network-volumes", json={"name": "data", "size": 50, "dataCenter": "US-TX-3"})
    assert created.status_code == 201
    volume = created.json()
    assert volume | {"id": ""} == {
        "id": "",
        "name": "data",
        "size": 50,
        "dataCenter": "US-TX-3",
        "type": "STANDARD",
    }
    assert api.get("/v2/network-volumes").json()["networkVolumes"] == [volume]
    grown = api.patch(f"/v2/network-volumes/{volume['id']}", json={"size": 80})
    assert grown.status_code == 200 and grown.json()["size"] == 80
    shrink = api.patch(f"/v2/network-volumes/{volume['id']}", json={"size": 60})
    assert shrink.status_code == 400 and "only grow" in shrink.json()["detail"]
    assert api.delete(f"/v2/network-volumes/{volume['id']}").status_code == 204
    assert api.get(f"/v2/network-volumes/{volume['id']}").status_code == 404


def test_volume_rules(api: httpx.Client) -> None:
    bad_dc = api.post("/v2/network-volumes", json={"name": "v", "size": 10, "dataCenter": "MARS-1"})
    assert bad_dc.status_code == 400
    bad_type = api.post(
        "/v2/network-volumes",
        json={"name": "v", "size": 10, "dataCenter": "US-KS-2", "type": "HIGH_PERFORMANCE"},
    )
    assert bad_type.status_code == 400
    assert (
        api.post("/v2/network-volumes", json={"name": "v", "size": 5, "dataCenter": "US-KS-2"}).status_code
        == 422
    )


def test_pod_follows_its_volume_and_holds_it(api: httpx.Client) -> None:
    volume = api.post("/v2/network-volumes", json={"name": "v", "size": 20, "dataCenter": "EU-RO-1"}).json()
    mounts = {"network": [{"volumeId": volume["id"], "path": "/workspace"}]}
    pod = api.post("/v2/pods", json=pod_body(mounts=mounts)).json()
    assert pod["dataCenterId"] == "EU-RO-1" and pod["mounts"]["network"][0]["volumeId"] == volume["id"]
    elsewhere = api.post("/v2/pods", json=pod_body(mounts=mounts, dataCenterIds=["US-TX-3"]))
    assert elsewhere.status_code == 400
    assert "EU-RO-1" in elsewhere.json()["detail"] and "US-TX-3" in elsewhere.json()["detail"]
    community = api.post("/v2/pods", json=pod_body(mounts=mounts, cloud="COMMUNITY"))
    assert community.status_code == 400 and "Secure" in community.json()["detail"]
    in_use = api.delete(f"/v2/network-volumes/{volume['id']}")
    assert in_use.status_code == 400 and pod["id"] in in_use.json()["detail"]
