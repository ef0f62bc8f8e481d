"""Faults on demand: 5xx (seeded), latency, dropped connections, lost responses, out-of-band loss."""

from __future__ import annotations

import time

import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import cluster_body, pod_body

pytestmark = pytest.mark.services

# An aborted socket reads as EOF or as a reset, depending on whether request bytes were still unread.
CLOSED_WITHOUT_REPLY = (httpx.RemoteProtocolError, httpx.ReadError)


def test_error_next_answers_5xx_without_side_effects(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.faults(errorNext=1, errorStatus=502, matchMethod="POST", matchPath="/v2/pods")
    failed = api.post("/v2/pods", json=pod_body())
    assert failed.status_code == 502 and failed.headers["content-type"] == "application/problem+json"
    assert rp.admin.live()["pods"] == []
    assert api.get("/v2/pods").status_code == 200  # GETs do not match the fault
    assert api.post("/v2/pods", json=pod_body()).status_code == 201


def test_error_rate_is_reproducible_with_a_seed(rp: LocalRunPod, api: httpx.Client) -> None:
    def run() -> list[int]:
        rp.admin.faults(errorRate=0.5, seed=7)
        return [api.get("/v2/catalog/gpus").status_code for _ in range(20)]

    first, second = run(), run()
    assert first == second and {200, 503} == set(first)


def test_added_latency(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.faults(latencyMs=300)
    started = time.monotonic()
    assert api.get("/v2/pods").status_code == 200
    assert time.monotonic() - started >= 0.3


def test_dropped_connection_changes_nothing(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.faults(dropNext=1, matchMethod="POST")
    with pytest.raises(CLOSED_WITHOUT_REPLY):
        api.post("/v2/pods", json=pod_body())
    assert rp.admin.live()["pods"] == []
    assert rp.admin.counters()["endpoints"]["POST /v2/pods"]["dropped"] == 1


def test_lost_response_commits_the_change(rp: LocalRunPod, api: httpx.Client) -> None:
    """The reply never arrives, yet the pod exists and bills: reconcile by name before retrying."""
    rp.admin.faults(loseNext=1, matchMethod="POST", matchPath="/v2/pods")
    with pytest.raises(CLOSED_WITHOUT_REPLY):
        api.post("/v2/pods", json=pod_body("unique-name"))
    pods = api.get("/v2/pods").json()["pods"]
    assert [p["name"] for p in pods] == ["unique-name"] and pods[0]["cost"] > 0
    assert rp.admin.counters()["endpoints"]["POST /v2/pods"]["lost"] == 1
    assert [e["event"] for e in rp.admin.audit()][-1] == "pod.create"


def test_duplicates_are_visible_to_tests(rp: LocalRunPod, api: httpx.Client) -> None:
    api.post("/v2/pods", json=pod_body("twin"))
    api.post("/v2/pods", json=pod_body("twin"))
    assert rp.admin.live()["duplicates"]["pod"] == ["twin"]


def test_out_of_band_termination_of_a_pod_and_a_cluster_node(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    rp.admin.out_of_band(pod_id)
    assert api.get(f"/v2/pods/{pod_id}").status_code == 404
    cluster = api.post("/v2/clusters", json=cluster_body()).json()
    members = api.get(f"/v2/clusters/{cluster['id']}/pods").json()["pods"]
    rp.admin.out_of_band(members[1]["id"], status="ERROR")
    after = api.get(f"/v2/clusters/{cluster['id']}").json()
    assert after["pods"]["byStatus"] == {"PROVISIONING": 1, "ERROR": 1}
    rp.admin.out_of_band(members[0]["id"])
    assert api.get(f"/v2/clusters/{cluster['id']}").json()["pods"]["total"] == 1
    lost = [e for e in rp.admin.audit() if e["event"] == "pod.lost"]
    assert {e["resourceId"] for e in lost} == {pod_id, members[0]["id"]}


def test_counters_by_templated_endpoint(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    api.get(f"/v2/pods/{pod_id}")
    api.get("/v2/pods/missing")
    endpoints = rp.admin.counters()["endpoints"]
    assert endpoints["GET /v2/pods/{id}"] == {"200": 1, "404": 1}
    assert endpoints["POST /v2/pods"] == {"201": 1}


def test_audit_log_names_every_mutation_and_no_credentials(rp: LocalRunPod, api: httpx.Client) -> None:
    pod_id = api.post("/v2/pods", json=pod_body(env={"TOKEN": "env-value-xyz"})).json()["id"]
    api.patch(f"/v2/pods/{pod_id}", json={"name": "b"})
    api.post(f"/v2/pods/{pod_id}/action", json={"action": "stop"})
    api.delete(f"/v2/pods/{pod_id}")
    events = [e["event"] for e in rp.admin.audit() if e["resourceId"] == pod_id]
    assert events == ["pod.create", "pod.update", "pod.stop", "pod.delete"]
    text = str(rp.admin.audit()) + (rp.state_dir / "emulator.log").read_text()
    assert rp.api_key not in text and "env-value-xyz" not in text


def test_lost_graphql_reply_still_creates_the_secret(rp: LocalRunPod, api: httpx.Client) -> None:
    from tests.emulator.conftest import gql

    create = "mutation C($input: SecretCreateInput!) { secretCreate(input: $input) { id } }"
    rp.admin.faults(loseNext=1, matchPath="/graphql")
    with pytest.raises(CLOSED_WITHOUT_REPLY):
        api.post("/graphql", json={"query": create, "variables": {"input": {"name": "s1", "value": "v"}}})
    retry = gql(api, create, input={"name": "s1", "value": "v"})
    assert "already exists" in retry["errors"][0]["message"]  # a blind retry meets its own lost create
    assert [s["name"] for s in rp.admin.live()["secrets"]] == ["s1"]
