"""`GET /_admin/counters/wait`: a long poll that answers once the server has counted N API requests."""

from __future__ import annotations

import threading

import httpx
import pytest

from harness.local import LocalRunPod

pytestmark = pytest.mark.services


def _total(rp: LocalRunPod) -> int:
    return sum(sum(by_status.values()) for by_status in rp.admin.counters()["endpoints"].values())


def test_the_wait_answers_at_the_nth_request_and_not_before(rp: LocalRunPod, api: httpx.Client) -> None:
    assert _total(rp) == 0
    assert not rp.admin.requests_reach(2, timeout_s=0.2)  # nothing counted yet: it times out, unreached
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(rp.admin.requests_reach(2, timeout_s=30)))
    waiter.start()
    api.get("/v2/pods").raise_for_status()
    waiter.join(timeout=0.5)
    assert waiter.is_alive() and answers == []  # one request counted: still waiting
    api.get("/v2/pods/nope")  # a 404 is counted too, as in `counters`
    waiter.join(timeout=60)
    assert answers == [True]  # woken by the second request: a wait that ran out would answer False
    assert _total(rp) == 2  # the admin calls themselves are not counted
    assert rp.admin.requests_reach(1, timeout_s=0)  # already there: answers at once


def test_a_reset_clears_the_total_the_wait_counts(rp: LocalRunPod, api: httpx.Client) -> None:
    api.get("/v2/pods").raise_for_status()
    assert rp.admin.requests_reach(1, timeout_s=0)
    rp.admin.reset()
    assert not rp.admin.requests_reach(1, timeout_s=0)


def test_a_bad_total_or_timeout_is_refused_naming_the_field(rp: LocalRunPod) -> None:
    for params, field in (({"total": -1}, "total"), ({"total": 1, "timeoutS": 61}, "timeoutS")):
        response = rp.admin.client.get("/_admin/counters/wait", params=params)
        assert response.status_code == 422 and field in response.text, response.text
