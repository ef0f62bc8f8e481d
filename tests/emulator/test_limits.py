"""Limits: capacity per (GPU, data center), spend limit, balance, per-key rate limit."""

from __future__ import annotations

import httpx

from emulator.harness import LocalRunPod
from emulator.problems import NO_CAPACITY
from tests.emulator.conftest import H100, cluster_body, pod_body


def test_capacity_runs_out_per_gpu_and_data_center(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.capacity(stock={f"{H100}@US-KS-2": 8})
    body = pod_body(gpu={"id": H100, "count": 8}, dataCenterIds=["US-KS-2"])
    assert api.post("/v2/pods", json=body).status_code == 201
    refused = api.post("/v2/pods", json=body)
    assert refused.status_code == 400 and refused.json()["detail"] == NO_CAPACITY
    assert api.post("/v2/pods", json=body | {"dataCenterIds": ["US-KS-2", "US-TX-3"]}).json()[
        "dataCenterId"
    ] == ("US-TX-3")


def test_stopped_pod_frees_capacity_and_may_not_get_it_back(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.capacity(stock={f"{H100}@US-KS-2": 8})
    body = pod_body(gpu={"id": H100, "count": 8}, dataCenterIds=["US-KS-2"])
    first = api.post("/v2/pods", json=body).json()["id"]
    api.post(f"/v2/pods/{first}/action", json={"action": "stop"})
    assert api.post("/v2/pods", json=body).status_code == 201
    restart = api.post(f"/v2/pods/{first}/action", json={"action": "start"})
    assert restart.status_code == 400 and restart.json()["detail"] == NO_CAPACITY


def test_exhaust_next_n_creates_then_for_good(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.capacity(exhaustNext=2)
    assert [api.post("/v2/pods", json=pod_body()).status_code for _ in range(3)] == [400, 400, 201]
    rp.admin.capacity(exhausted=True)
    assert api.post("/v2/clusters", json=cluster_body()).json()["detail"] == NO_CAPACITY
    assert api.post("/v2/pods", json=pod_body()).status_code == 400


def test_spend_limit_names_the_limit(rp: LocalRunPod, api: httpx.Client) -> None:
    assert rp.admin.live()["spendPerHour"] == 0
    assert api.post("/v2/clusters", json=cluster_body()).status_code == 201  # 16 x 3.99 = 63.84 of 80
    refused = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 8}))  # +31.92
    assert refused.status_code == 400
    assert "$80.00/h" in refused.json()["detail"] and refused.json()["title"] == "Spend limit exceeded"
    rp.admin.limits(spendLimit=300)
    assert api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 8})).status_code == 201
    rp.admin.limits(spendLimit=80)
    sixty_four = cluster_body() | {"compute": {"gpuTypeId": H100, "gpuCountPerPod": 8, "podCount": 8}}
    assert "spend limit" in api.post("/v2/clusters", json=sixty_four).json()["detail"]


def test_balance_needs_one_hour(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.limits(balance=5)
    refused = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 2}))  # 7.98/h
    assert refused.status_code == 402 and "balance" in refused.json()["detail"]
    assert api.post("/v2/pods", json=pod_body()).status_code == 201  # 3.99/h fits


def test_rate_limit_429_with_headers(rp: LocalRunPod, api: httpx.Client) -> None:
    rp.admin.limits(ratePerMinute=5)
    answers = [api.get("/v2/pods") for _ in range(7)]
    ok = [r for r in answers if r.status_code == 200]
    limited = [r for r in answers if r.status_code == 429]
    assert ok and limited and limited[0].headers["content-type"] == "application/problem+json"
    assert ok[0].headers["RateLimit-Policy"] == '"minute";q=5;w=60'
    assert ok[0].headers["RateLimit"].startswith('"minute";r=')
    assert int(limited[0].headers["Retry-After"]) == 12  # one token per 60/5 s
    assert "r=0" in limited[0].headers["RateLimit"]
    rp.admin.advance(12)
    assert api.get("/v2/pods").status_code == 200
    assert rp.admin.counters()["rateLimited"] >= len(limited)
