"""GraphQL subset: secrets without values, spot withdrawn by default, preemption with a 5 s notice."""

from __future__ import annotations

import httpx
import pytest

from harness.local import LocalRunPod
from tests.emulator.conftest import H100, gql

pytestmark = pytest.mark.services

CREATE = "mutation Create($input: SecretCreateInput!) { secretCreate(input: $input) { id name description } }"
UPDATE = "mutation Update($input: SecretValueUpdateInput!) { secretValueUpdate(input: $input) { id name } }"
DELETE = "mutation Delete($id: ID!) { secretDelete(id: $id) }"
LOOKUP = "query Find($name: String) { myself { secrets(name: $name) { id name description createdAt } } }"
RENT = (
    "mutation Rent($input: PodRentInterruptableInput!) "
    "{ podRentInterruptable(input: $input) { id costPerHr } }"
)
RESUME = "mutation Resume($input: PodBidResumeInput!) { podBidResume(input: $input) { id desiredStatus } }"
SECRET_VALUE = "hf_do-not-leak-0123456789"


def spot_input(**overrides: object) -> dict[str, object]:
    return {
        "bidPerGpu": 2.0,
        "gpuTypeId": H100,
        "gpuCount": 1,
        "imageName": "img",
        "ports": "22/tcp",
    } | overrides


def test_secret_lifecycle_never_exposes_the_value(rp: LocalRunPod, api: httpx.Client) -> None:
    since = rp.admin.audit()[-1]["seq"]  # the audit log is append-only: it outlives `reset`
    made = gql(api, CREATE, input={"name": "hf_token", "value": SECRET_VALUE, "description": "HF"})
    secret = made["data"]["secretCreate"]
    assert secret["name"] == "hf_token" and "errors" not in made
    found = gql(api, LOOKUP, name="hf_token")["data"]["myself"]["secrets"]
    assert [s["id"] for s in found] == [secret["id"]] and "value" not in found[0]
    assert gql(api, UPDATE, input={"id": secret["id"], "value": SECRET_VALUE + "2"})["data"][
        "secretValueUpdate"
    ]
    assert rp.admin.live()["secrets"][0]["valueVersion"] == 2
    deleted = gql(api, DELETE, id=secret["id"])
    assert deleted == {"data": {"secretDelete": None}}  # Void: null, as RunPod's docs show
    assert gql(api, LOOKUP)["data"]["myself"]["secrets"] == []
    events = [e["event"] for e in rp.admin.audit(since)]
    assert [e for e in events if e.startswith("secret.")] == [
        "secret.create",
        "secret.update",
        "secret.delete",
    ]
    stored = b"".join(p.read_bytes() for p in rp.state_dir.rglob("*") if p.is_file())
    assert SECRET_VALUE.encode() not in stored and rp.api_key.encode() not in stored
    assert SECRET_VALUE not in str(rp.admin.audit())


def test_graphql_errors_are_http_200(api: httpx.Client) -> None:
    gql(api, CREATE, input={"name": "dup", "value": "v"})
    dup = gql(api, CREATE, input={"name": "dup", "value": "v"})
    assert dup["data"]["secretCreate"] is None and "already exists" in dup["errors"][0]["message"]
    assert "errors" in gql(api, "mutation { secretCreate(input: {name: 1}) { id } }")
    assert "errors" in gql(
        api, "{ myself { secrets { value } } }"
    )  # no such field: values are never readable
    assert "errors" in gql(api, "query {")
    assert api.post("/graphql", content=b"not json").status_code == 400


def test_spot_is_withdrawn_by_default(rp: LocalRunPod, api: httpx.Client) -> None:
    refused = gql(api, RENT, input=spot_input())
    assert refused["data"]["podRentInterruptable"] is None
    message = refused["errors"][0]["message"]
    assert "no longer offered" in message and "on-demand" in message
    assert rp.admin.live()["pods"] == []


def test_spot_preemption_after_notice_and_resume(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.limits(offerSpot=True)
    low = gql(api, RENT, input=spot_input(bidPerGpu=0.5))
    assert "below the current minimum" in low["errors"][0]["message"]
    pod = gql(api, RENT, input=spot_input())["data"]["podRentInterruptable"]
    assert pod["costPerHr"] == 2.0
    rp.admin.advance(20)
    notice = rp.admin.preempt(pod["id"])
    assert notice["noticeSeconds"] == 5
    rp.admin.advance(4.9)
    assert api.get(f"/v2/pods/{pod['id']}").json()["status"] == "RUNNING"  # SIGTERM sent, still running
    rp.admin.advance(0.2)
    assert api.get(f"/v2/pods/{pod['id']}").json()["status"] == "EXITED"
    events = [
        (e["event"], e["detail"].get("signal")) for e in rp.admin.audit() if e["resourceId"] == pod["id"]
    ]
    assert events[-2:] == [("pod.preempt_notice", "SIGTERM"), ("pod.preempted", "SIGKILL")]
    resumed = gql(api, RESUME, input={"podId": pod["id"], "bidPerGpu": 2.2})["data"]["podBidResume"]
    assert resumed["desiredStatus"] == "RUNNING"
    assert api.get(f"/v2/pods/{pod['id']}").json()["cost"] == 2.2


def test_only_spot_pods_are_preempted(rp: LocalRunPod, api: httpx.Client) -> None:
    from tests.emulator.conftest import pod_body

    pod_id = api.post("/v2/pods", json=pod_body()).json()["id"]
    assert rp.admin.client.post(f"/_admin/pods/{pod_id}/preempt").status_code == 409


def test_graphql_retired_answers_410_and_keeps_the_secrets(rp: LocalRunPod, api: httpx.Client) -> None:
    made = gql(api, CREATE, input={"name": "kept", "value": SECRET_VALUE})["data"]["secretCreate"]
    rp.admin.limits(graphql="gone")
    for document, variables in ((LOOKUP, {}), (DELETE, {"id": made["id"]})):
        gone = api.post("/graphql", json={"query": document, "variables": variables})
        assert gone.status_code == 410 and "REST API" in gone.json()["errors"][0]["message"]
    assert [s["name"] for s in rp.admin.live()["secrets"]] == ["kept"]  # nothing changed behind the 410
    assert api.get("/v2/pods").status_code == 200  # REST v2 is untouched
    rp.admin.limits(graphql="limited", graphqlRetryAfterS=7200)
    limited = api.post("/graphql", json={"query": LOOKUP})
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "7200"
    rp.admin.limits(graphql="on")
    assert gql(api, LOOKUP)["data"]["myself"]["secrets"][0]["name"] == "kept"


def test_graphql_fault_answers_the_next_requests_only(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.faults(graphqlNext=2, graphqlStatus=429, graphqlRetryAfterS=5)
    answers = [api.post("/graphql", json={"query": LOOKUP}) for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["Retry-After"] == "5"
    assert [e["event"] for e in rp.admin.audit()].count("graphql.refused") >= 2
