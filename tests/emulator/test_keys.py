"""Issue #45: the local RunPod's key kinds (All, Restricted per API, Read Only) and RunPod's 403 shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.config import DEFAULT_API_KEY, DEFAULT_READ_ONLY_KEY
from emulator.keys import Grant, api_of, refusal
from harness.inprocess import InProcessRunPod, in_process
from tests.emulator.conftest import pod_body

PROBLEM = "application/problem+json"
BILLING_ONLY = "billing-reader"
PODS_WRITER = "pods-writer"


@pytest.fixture
def rp(tmp_path: Path) -> Iterator[InProcessRunPod]:
    keys = {BILLING_ONLY: {"billing": "read"}, PODS_WRITER: {"pods": "read_write", "graphql": "read"}}
    with in_process(tmp_path, restricted_keys=keys) as server:
        yield server


def http(rp: InProcessRunPod, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=rp.base_url, transport=rp.transport, headers={"Authorization": f"Bearer {key}"}
    )


def test_api_of_and_refusal_are_per_api_and_per_method() -> None:
    assert [api_of(p) for p in ("/v2/pods/x/action", "/v2/billing/pods", "/graphql")] == [
        "pods",
        "billing",
        "graphql",
    ]
    assert refusal(Grant("all"), "DELETE", "/v2/pods/x") is None
    assert refusal(Grant("read_only"), "GET", "/v2/pods") is None
    assert "read-only" in (refusal(Grant("read_only"), "PATCH", "/v2/pods/x") or "")
    restricted = Grant("restricted", (("pods", "read"),))
    assert "no access to the clusters API" in (refusal(restricted, "GET", "/v2/clusters") or "")
    assert "restricted to reading the pods API" in (refusal(restricted, "POST", "/v2/pods") or "")


def test_every_refusal_is_a_403_problem_with_the_quota_headers(rp: InProcessRunPod) -> None:
    """ForbiddenError (openapi-v2 components/responses): valid key, no access; problem+json, RateLimit."""
    cases = [
        (DEFAULT_READ_ONLY_KEY, "POST", "/v2/pods"),
        (DEFAULT_READ_ONLY_KEY, "DELETE", "/v2/network-volumes/v1"),
        (BILLING_ONLY, "GET", "/v2/pods"),
        (BILLING_ONLY, "POST", "/graphql"),
        (PODS_WRITER, "GET", "/v2/billing/pods"),
    ]
    for key, method, path in cases:
        with http(rp, key) as api:
            answer = api.request(method, path, json=pod_body() if method == "POST" else None)
        assert answer.status_code == 403, (key, method, path)
        assert answer.headers["content-type"] == PROBLEM and "RateLimit" in answer.headers
        body = answer.json()
        assert body["title"] == "Forbidden" and body["status"] == 403
        assert body["detail"].startswith("access denied")
    assert rp.world.pods == {}


def test_granted_apis_work_and_a_graphql_read_grant_refuses_mutations(rp: InProcessRunPod) -> None:
    with http(rp, BILLING_ONLY) as billing:
        assert billing.get("/v2/billing/pods").status_code == 200
    with http(rp, PODS_WRITER) as writer:
        assert writer.post("/v2/pods", json=pod_body()).status_code == 201
        assert writer.post("/graphql", json={"query": "{ myself { id } }"}).status_code == 200
        mutation = "mutation($id: ID!) { secretDelete(id: $id) }"
        refused = writer.post("/graphql", json={"query": mutation, "variables": {"id": "x"}})
        assert refused.status_code == 403
    with http(rp, DEFAULT_API_KEY) as owner:
        assert owner.get("/v2/billing/pods").status_code == 200
    assert len(rp.world.pods) == 1
