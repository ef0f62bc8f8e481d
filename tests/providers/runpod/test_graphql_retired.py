"""RunPod's GraphQL answering 410 Gone (or 429 past the deadline): an older stack's secrets are dropped with a
line naming what is left in the console, spot is refused at preview with the on-demand price, auto rents
on-demand, and pods made with secret references keep running (issue #67)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from providers.runpod import catalog, errors, spot
from providers.runpod.pod import PodProvider
from providers.runpod.secret import SecretProvider
from tests.providers.runpod.fake_runpod import FakeRunPod, Fault

H100 = "NVIDIA H100 80GB HBM3"
GONE = Fault("status", 410)
SECRET = {
    "name": "trainstack-dev-hf_token",
    "value": "hf_super_secret_value",
    "description": "trainstack stack dev: HF_TOKEN",
}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "10")
    catalog.reset_cache()
    spot.forget()
    yield
    catalog.reset_cache()
    spot.forget()


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr("pulumi.log.warn", lambda message, *a, **k: said.append(message))
    return said


def _made(fake: FakeRunPod) -> tuple[SecretProvider, str, dict[str, Any]]:
    provider = SecretProvider(fake.factory())
    created = provider.create(dict(provider.check({}, SECRET).inputs))
    return provider, created.id, dict(created.outs or {})


def test_while_graphql_answers_the_old_secret_is_deleted(warnings: list[str]) -> None:
    fake = FakeRunPod()
    provider, sid, outs = _made(fake)
    provider.delete(sid, outs)
    assert fake.secrets == {} and warnings == []


@pytest.mark.parametrize(
    ("fault", "why"),
    [(GONE, "410 Gone"), (Fault("status", 429, headers={"Retry-After": "7200"}), "rate-limits it")],
)
def test_once_graphql_is_gone_delete_drops_the_secret_and_names_what_is_left(
    warnings: list[str], fault: Fault, why: str
) -> None:
    fake = FakeRunPod()
    provider, sid, outs = _made(fake)
    fake.fail("POST", "/graphql", fault)
    provider.delete(sid, outs)  # no raise: Pulumi drops it from the state
    assert list(fake.secrets) == [sid]  # still at RunPod, for a person to delete
    (line,) = warnings
    assert "'trainstack-dev-hf_token'" in line and sid in line and why in line and "RunPod console" in line
    assert SECRET["value"] not in line


def test_refresh_keeps_an_old_secret_it_can_no_longer_look_at() -> None:
    fake = FakeRunPod()
    provider, sid, outs = _made(fake)
    fake.fail("POST", "/graphql", GONE)
    assert provider.read(sid, outs).id == sid


def test_other_graphql_failures_still_fail_the_delete() -> None:
    fake = FakeRunPod()
    provider, sid, outs = _made(fake)
    fake.fail("POST", "/graphql", Fault("status", 403))
    with pytest.raises(errors.AuthError):
        provider.delete(sid, outs)


def _pod(**over: Any) -> dict[str, Any]:
    base = {"name": "trainer", "image": "img", "gpu_type_id": H100, "gpu_count": 8.0, "ports": ["22/tcp"]}
    return {**base, **over}


def test_spot_is_refused_at_preview_naming_on_demand_and_its_price() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/graphql", GONE)
    result = PodProvider(fake.factory()).check({}, _pod(capacity="spot", bid_per_gpu=2.0))
    (failure,) = result.failures
    assert failure.property == "capacity"
    assert "410 Gone" in failure.reason and "capacity: on_demand" in failure.reason
    assert (
        f"8 x {H100} at ${4.19 * 8:,.2f}/h" in failure.reason
        and "docs.runpod.io/pods/pricing" in failure.reason
    )


def test_auto_rents_on_demand_saying_so_once(warnings: list[str]) -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/graphql", GONE)
    provider = PodProvider(fake.factory())
    for name in ("a", "b"):
        assert provider.check({}, _pod(name=name, capacity="auto", bid_per_gpu=2.0)).failures == []
    assert len(warnings) == 1 and "falls back to on-demand" in warnings[0] and "$33.52/h" in warnings[0]
    outs = provider.create(dict(provider.check({}, _pod(capacity="auto", bid_per_gpu=2.0)).inputs)).outs or {}
    assert outs["capacity_obtained"] == "on_demand"
    assert not [b for _m, p, b in fake.bodies if p == "/graphql" and "podRentInterruptable" in b["query"]]
    assert fake.count("POST", "/graphql") == 1  # the one probe of this process


def test_while_graphql_answers_spot_and_auto_check_as_before() -> None:
    provider = PodProvider(FakeRunPod().factory())
    for capacity in ("spot", "auto"):
        assert provider.check({}, _pod(capacity=capacity, bid_per_gpu=2.0)).failures == []


def test_a_pod_made_with_secret_references_is_no_change_without_them() -> None:
    """Dropping `{{ RUNPOD_SECRET_... }}` from env alone would restart every container (or replace a
    cluster)."""
    provider = PodProvider(FakeRunPod().factory())
    old_env = {
        "TRAINSTACK_OWNER": "trainstack/dev",
        "HF_TOKEN": "{{ RUNPOD_SECRET_trainstack-dev-hf_token }}",
    }
    olds = provider.create(dict(provider.check({}, _pod(env=old_env)).inputs)).outs or {}
    news = dict(provider.check({}, _pod(env={"TRAINSTACK_OWNER": "trainstack/dev"})).inputs)
    assert not provider.diff("p", olds, news).changes
    other = dict(provider.check({}, _pod(env={"TRAINSTACK_OWNER": "trainstack/dev", "A": "1"})).inputs)
    assert provider.diff("p", olds, other).changes
