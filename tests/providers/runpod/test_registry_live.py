"""`runpod:RegistryAuth` over real HTTP against the local RunPod: the password never reaches an output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.local import LocalRunPod
from providers.runpod import catalog
from providers.runpod.pod import PodProvider
from providers.runpod.registry import RegistryAuthProvider

pytestmark = pytest.mark.services

PASSWORD = "ghp_do-not-leak-0123456789"
AUTH = {"name": "ghcr-team", "username": "bot", "password": PASSWORD}


@pytest.fixture
def runpod(local_runpod: LocalRunPod, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalRunPod]:
    for key, value in {
        **local_runpod.env(),
        "TRAINSTACK_POLL_INTERVAL_S": "0.2",
        "RUNPOD_RATE_LIMIT_PER_MIN": "100000",
        "TRAINSTACK_READY_TIMEOUT_S": "60",
    }.items():
        monkeypatch.setenv(key, value)
    local_runpod.admin.reset()
    catalog.reset_cache()
    yield local_runpod
    local_runpod.admin.reset()
    catalog.reset_cache()


def _checked(provider: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    result = provider.check({}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return dict(result.inputs)


def test_registry_auth_lifecycle_keeps_the_password_out_of_outputs(runpod: LocalRunPod) -> None:
    provider = RegistryAuthProvider()
    created = provider.create(_checked(provider, AUTH))
    outs = created.outs or {}
    assert outs["registry_id"] == created.id and "password" not in outs
    assert PASSWORD not in json.dumps(outs) and outs["password_hash"].startswith("hmac-sha256$")
    with runpod.client() as api:
        assert api.get(f"/v2/registries/{created.id}").json() == {"id": created.id, "name": "ghcr-team"}
    assert provider.read(created.id, outs).id == created.id
    assert provider.diff(created.id, outs, {**AUTH}).changes is False
    rotated = provider.diff(created.id, outs, {**AUTH, "password": "new"})
    assert rotated.replaces == ["password"]  # RunPod has no update: a new password is a new credential
    provider.delete(created.id, outs)
    assert provider.read(created.id, outs).id is None
    provider.delete(created.id, outs)  # already gone: still success


def test_a_pod_pulls_with_the_credential_and_holds_it(runpod: LocalRunPod) -> None:
    auth = RegistryAuthProvider()
    registry = auth.create(_checked(auth, AUTH))
    pods = PodProvider()
    pod_inputs = {
        "name": "private-image",
        "image": "ghcr.io/team/trainer:1.0",
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "gpu_count": 1.0,
        "registry_id": registry.id,
    }
    pod = pods.create(_checked(pods, pod_inputs))
    with runpod.client() as api:
        assert api.get(f"/v2/pods/{pod.id}").json()["registry"] == registry.id
        refused = api.delete(f"/v2/registries/{registry.id}")
    assert refused.status_code == 400  # "Rejected if any pod currently uses this credential"
    pods.delete(pod.id, pod.outs or {})
    auth.delete(registry.id, registry.outs or {})


def test_spot_pods_cannot_name_a_credential() -> None:
    result = PodProvider().check(
        {},
        {"name": "p", "image": "img:1", "gpu_type_id": "NVIDIA H100 80GB HBM3", "capacity": "spot",
         "bid_per_gpu": 2.0, "registry_id": "reg-1"},
    )  # fmt: skip
    assert [f.property for f in result.failures] == ["registry_id"]
