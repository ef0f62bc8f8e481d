"""Fixtures for the emulator's own tests: one frozen-clock server, reset before every test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.local import LocalRunPod, start_local_runpod

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="session")
def frozen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    """Time moves only through `admin.advance`, so every phase change is deterministic."""
    server = start_local_runpod(
        tmp_path_factory.mktemp("frozen"), "--time-scale", "0", "--rate-per-minute", "100000"
    )
    yield server
    server.stop()


@pytest.fixture
def rp(frozen_server: LocalRunPod) -> Iterator[LocalRunPod]:
    frozen_server.admin.reset()
    frozen_server.admin.limits(ratePerMinute=100000)
    yield frozen_server


@pytest.fixture
def api(rp: LocalRunPod) -> Iterator[httpx.Client]:
    with rp.client() as client:
        yield client


def pod_body(name: str = "trainer", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "image": "runpod/pytorch:2.8.0",
        "gpu": {"id": H100, "count": 1},
        "ports": ["22/tcp", "8888/http"],
    }
    return body | overrides


def cluster_body(name: str = "fleet", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "type": "TRAINING",
        "image": "runpod/pytorch:2.8.0",
        "compute": {"gpuTypeId": H100, "gpuCountPerPod": 8, "podCount": 2},
    }
    return body | overrides


def gql(api: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    response = api.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result
