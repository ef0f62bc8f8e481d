"""Limits: capacity per (GPU, data center), spend limit, balance, per-key rate limit."""

from __future__ import annotations

import httpx
import pytest

from emulator.problems import NO_CAPACITY
from harness.local import LocalRunPod
from providers.runpod.client import RunPodClient
from providers.runpod.errors import RateLimitedError
from providers.runpod.ratelimit import TokenBucket
from tests.emulator.conftest import H100, cluster_body, pod_body

pytestmark = pytest.mark.services


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
    # Hour and day quotas follow the spec example's ratio to the minute (3000/60, 50000/60) unless set.
    policy = '"minute";q=5;w=60, "hour";q=250;w=3600, "day";q=4167;w=86400'
    assert ok[0].headers["RateLimit-Policy"] == policy
    assert ok[0].headers["RateLimit"].startswith('"minute";r=4;t=')
    assert '"hour";r=249;t=' in ok[0].headers["RateLimit"]
    # A sliding window: the next request fits once the first five leave the last minute (issue #62: a
    # bucket refilled one token per 60/5 s let ten through in a minute).
    retry = int(limited[0].headers["Retry-After"])
    assert 60 <= retry <= 61
    assert limited[0].headers["RateLimit"].startswith('"minute";r=0;')
    assert limited[0].json()["detail"] == "rate limit exceeded for the minute window"
    rp.admin.advance(retry - 1)
    assert api.get("/v2/pods").status_code == 429
    rp.admin.advance(1)
    assert api.get("/v2/pods").status_code == 200
    assert rp.admin.counters()["rateLimited"] >= len(limited) + 1


def test_hour_and_day_windows_limit_on_their_own(rp: LocalRunPod, api: httpx.Client) -> None:
    """The spec's RateLimit-Policy lists minute, hour and day windows (60/min, 3000/h, 50000/day)."""
    rp.admin.limits(ratePerMinute=100, ratePerHour=8, ratePerDay=12)
    assert [api.get("/v2/pods").status_code for _ in range(8)] == [200] * 8
    limited = api.get("/v2/pods")
    assert limited.status_code == 429 and limited.json()["detail"].endswith("the hour window")
    retry = int(limited.headers["Retry-After"])
    assert 3600 <= retry <= 3660  # the eight leave the last hour (counted by the minute)
    assert '"hour";r=0;' in limited.headers["RateLimit"]
    rp.admin.advance(60)  # the minute window is whole again; the hour window is not
    assert api.get("/v2/pods").status_code == 429
    rp.admin.advance(retry - 60)
    assert api.get("/v2/pods").status_code == 200
    rp.admin.advance(3600)
    # 9 taken this day: 3 more fit, the 4th waits for the day's first requests to leave its window.
    statuses = [api.get("/v2/pods").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    day = api.get("/v2/pods")
    assert (
        day.json()["detail"].endswith("the day window") and 79000 < int(day.headers["Retry-After"]) <= 86400
    )


def _client_on_emulated_time(rp: LocalRunPod, limiter_args: dict[str, int]) -> RunPodClient:
    """Our real client whose clock and sleep are the frozen emulator's: waiting advances it."""
    now = [rp.admin.advance(0)]

    def sleep(seconds: float) -> None:
        now[0] = rp.admin.advance(seconds)

    def clock() -> float:
        return now[0]

    limiter = TokenBucket(60, **limiter_args, clock=clock, sleep=sleep)
    return RunPodClient(rp.base_url, rp.api_key, limiter=limiter, clock=clock, sleep=sleep)


def test_our_client_stays_under_the_hour_window_of_a_long_run(rp: LocalRunPod) -> None:
    """400 calls cross an hour quota of 300: the old minute-only bucket met 429s, the limiter meets none."""
    rp.admin.limits(ratePerMinute=60, ratePerHour=300, ratePerDay=100000)
    # The 301st waits out the hour (a sliding window): past the client's retry deadline.
    with _client_on_emulated_time(rp, {}) as minute_only, pytest.raises(RateLimitedError):
        for _ in range(400):
            minute_only.list_pods()
    assert rp.admin.counters()["rateLimited"] > 0  # what the issue saw: the hour window was ignored
    rp.admin.reset()
    rp.admin.limits(ratePerMinute=60, ratePerHour=300, ratePerDay=100000)
    with _client_on_emulated_time(rp, {"per_hour": 300, "per_day": 100000}) as windowed:
        for _ in range(400):
            windowed.list_pods()
    assert rp.admin.counters()["rateLimited"] == 0
