"""Issue #20: where the local RunPod differed from RunPod (auth codes, GraphQL ids, bad input, 405, 501).

Each test here failed against the emulator before the fix; the spec text each one follows is quoted.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from emulator.config import DEFAULT_READ_ONLY_KEY
from harness.local import LocalRunPod, start_local_runpod
from tests.emulator.conftest import cluster_body, gql, pod_body

pytestmark = pytest.mark.services

PROBLEM = "application/problem+json"


# -- defect 1: auth codes -----------------------------------------------------------------------------


def test_unknown_key_is_401_and_read_only_key_writing_is_403(rp: LocalRunPod) -> None:
    """UnauthorizedError: "bearer token is missing, malformed, expired, or invalid" -> 401;
    ForbiddenError: "the bearer token is valid, but it does not grant access" -> 403."""
    with httpx.Client(base_url=rp.base_url) as anonymous:
        assert anonymous.get("/v2/pods").status_code == 401
        for header in ("Bearer nope", "Basic abc", "Bearer"):
            wrong = anonymous.get("/v2/pods", headers={"Authorization": header})
            assert wrong.status_code == 401 and wrong.headers["content-type"] == PROBLEM, header
        assert anonymous.post("/graphql", json={"query": "{ myself { id } }"}).status_code == 401
        bad_gql = anonymous.post(
            "/graphql", json={"query": "{ myself { id } }"}, headers={"Authorization": "Bearer nope"}
        )
        assert bad_gql.status_code == 401
    read_only = {"Authorization": f"Bearer {DEFAULT_READ_ONLY_KEY}"}
    with httpx.Client(base_url=rp.base_url, headers=read_only) as reader:
        assert reader.get("/v2/pods").status_code == 200
        refused = reader.post("/v2/pods", json=pod_body())
        assert refused.status_code == 403 and refused.json()["status"] == 403
        assert "RateLimit" in refused.headers  # ForbiddenError carries the quota headers
        query = reader.post("/graphql", json={"query": "{ myself { id } }"})
        assert query.status_code == 200 and query.json()["data"]["myself"]["id"]
        mutation = "mutation($id: ID!) { secretDelete(id: $id) }"
        assert reader.post("/graphql", json={"query": mutation, "variables": {"id": "x"}}).status_code == 403
    assert rp.admin.live()["pods"] == []


def test_graphql_accepts_api_key_in_the_url_and_never_logs_it(tmp_path: Path) -> None:
    """RunPod's GraphQL docs call `https://api.runpod.io/graphql?api_key=...`; the key must reach no log."""
    server = start_local_runpod(tmp_path, "--access-log", "--log-level", "info")
    try:
        with httpx.Client(base_url=server.base_url) as plain:
            ok = plain.post(
                "/graphql", params={"api_key": server.api_key}, json={"query": "{ myself { id } }"}
            )
            assert ok.status_code == 200 and ok.json()["data"]["myself"]["id"]
            wrong = plain.post("/graphql", params={"api_key": "wrong-key-123"}, json={"query": "{ x }"})
            assert wrong.status_code == 401
            # Only /graphql reads the query string; REST wants the bearer header.
            assert plain.get("/v2/pods", params={"api_key": server.api_key}).status_code == 401
    finally:
        server.stop()
    log = (tmp_path / "emulator.log").read_text()
    assert "POST /graphql" in log  # the access log did run
    assert server.api_key not in log and "wrong-key-123" not in log


# -- defect 2: the GraphQL secrets schema of RunPod's own clients ------------------------------------


def test_secret_documents_of_runpods_own_provider(api: httpx.Client) -> None:
    """The documents of runpod/pulumi-runpod-native provider/secret.go, verbatim in shape."""
    create = (
        "mutation SecretCreate($input: SecretCreateInput!) { secretCreate(input: $input) "
        "{ id name description createdAt updatedAt } }"
    )
    made = gql(api, create, input={"name": "wandb", "value": "v1", "description": "W&B"})
    assert "errors" not in made, made
    sid = made["data"]["secretCreate"]["id"]
    read = "query GetSecret($id: ID!) { secret(id: $id) { id name description createdAt updatedAt } }"
    assert gql(api, read, id=sid)["data"]["secret"]["name"] == "wandb"
    describe = (
        "mutation SecretDescriptionUpdate($input: SecretDescriptionUpdateInput!) "
        "{ secretDescriptionUpdate(input: $input) { id description } }"
    )
    assert gql(api, describe, input={"id": sid, "description": "new"})["data"]["secretDescriptionUpdate"] == {
        "id": sid,
        "description": "new",
    }
    assert gql(api, "mutation DeleteSecret($id: ID!) { secretDelete(id: $id) }", id=sid) == {
        "data": {"secretDelete": None}
    }
    assert gql(api, read, id=sid)["data"]["secret"] is None  # read as "deleted" by RunPod's provider


def test_string_variable_in_an_id_position_is_refused(api: httpx.Client) -> None:
    """What our old `$id: String!` document would meet on a strict server."""
    answer = gql(api, "mutation D($id: String!) { secretDelete(id: $id) }", id="x")
    assert "errors" in answer and "ID!" in answer["errors"][0]["message"]


def test_our_secret_documents_validate_against_the_schema() -> None:
    from graphql import parse, validate

    from emulator.graphql_api import SCHEMA
    from providers.runpod import gql as ours

    for name in ("SECRETS_QUERY", "SECRET_CREATE", "SECRET_VALUE_UPDATE", "SECRET_DELETE", "SPOT_RENT"):
        assert validate(SCHEMA, parse(getattr(ours, name))) == [], name


# -- defect 5: bad input is a 4xx and leaves the state whole -----------------------------------------

DEEP = b'{"name":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
LONG_INT = b'{"name": "x", "image": "i", "gpu": {"id": "g"}, "disk": ' + b"9" * 5000 + b"}"
SURROGATE = b'{"name": "\\ud800", "image": "img", "gpu": {"id": "NVIDIA H100 80GB HBM3"}}'
HUGE_FLOAT = b'{"name": "x", "image": "i", "gpu": {"id": "g"}, "disk": 1e999}'


@pytest.mark.parametrize("body", [SURROGATE, DEEP, LONG_INT, HUGE_FLOAT, b"{", b"\xff\xfe"])
def test_unreadable_bodies_are_400_problems_and_change_nothing(
    rp: LocalRunPod, api: httpx.Client, body: bytes
) -> None:
    headers = {"Content-Type": "application/json"}
    answer = api.post("/v2/pods", content=body, headers=headers)
    assert answer.status_code == 400 and answer.headers["content-type"] == PROBLEM
    assert answer.json()["detail"].startswith("Malformed request body")
    graphql = api.post("/graphql", content=body, headers=headers)
    assert graphql.status_code == 400 and graphql.json()["errors"]
    assert api.get("/v2/pods").status_code == 200
    assert rp.admin.live()["pods"] == []


def test_deep_graphql_query_is_a_graphql_error_not_a_crash(api: httpx.Client) -> None:
    query = "{ myself " + "{ id " * 5000 + "}" * 5000 + " }"
    answer = api.post("/graphql", json={"query": query})
    assert answer.status_code == 200 and "nested too deeply" in answer.json()["errors"][0]["message"]
    assert api.get("/v2/pods").status_code == 200


def test_a_failed_write_rolls_back_memory_and_file(rp: LocalRunPod, api: httpx.Client) -> None:
    """The surrogate once failed the audit insert after the pod was kept in memory, and every later
    GET /v2/pods answered 500. Now one request is one transaction: a write that fails part-way (here the
    cluster record, after both member pods were written) rolls back the file and reloads memory."""
    assert api.post("/v2/pods", json=pod_body("kept")).status_code == 201
    rp.admin.faults(failWrite=3)
    failed = api.post("/v2/clusters", json=cluster_body())
    assert failed.status_code == 500
    assert [p["name"] for p in api.get("/v2/pods", params={"includeClusterPods": "true"}).json()["pods"]] == [
        "kept"
    ]
    assert api.get("/v2/clusters").json()["clusters"] == []
    assert [p["name"] for p in rp.admin.live()["pods"]] == ["kept"]
    with sqlite3.connect(rp.state_dir / "runpod.sqlite3") as db:
        kinds = db.execute(
            "SELECT kind, COUNT(*) FROM resources WHERE kind != 'meter' GROUP BY kind"
        ).fetchall()
    assert kinds == [("pod", 1)]
    assert api.post("/v2/clusters", json=cluster_body()).status_code == 201  # the capacity is free again


# -- defect 6: unimplemented operations are 501, not 404 ---------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("DELETE", "/v2/templates/tpl-1", "deleteTemplate"),
        ("GET", "/v2/serverless", "listEndpoints"),
        ("GET", "/v2/billing", "listBilling"),
        ("GET", "/v2/catalog/cpus", "listCpuTypes"),
    ],
)
def test_unimplemented_operation_is_501_naming_it(
    api: httpx.Client, method: str, path: str, operation: str
) -> None:
    answer = api.request(method, path)
    assert answer.status_code == 501 and answer.headers["content-type"] == PROBLEM
    assert operation in answer.json()["detail"]


def test_unknown_path_is_still_404(api: httpx.Client) -> None:
    assert api.get("/v2/nothing-here").status_code == 404


# -- defect 7: 405 lists every method of the path ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v2/pods", "GET, POST"),
        ("POST", "/v2/pods/abc", "GET, PATCH, DELETE"),
        ("DELETE", "/v2/account/ssh-keys", "GET, PUT"),
        ("GET", "/v2/pods/abc/action", "POST"),
    ],
)
def test_405_allow_names_every_method(api: httpx.Client, method: str, path: str, allow: str) -> None:
    """MethodNotAllowedError's Allow: "Comma-separated methods supported by the target path"."""
    answer = api.request(method, path, json={})
    assert answer.status_code == 405 and answer.headers["content-type"] == PROBLEM
    assert answer.headers["Allow"] == allow
    assert "RateLimit" in answer.headers
