"""End-to-end fixtures: one local RunPod per test module, and the reliability report for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.e2e.reliability import Report


@pytest.fixture(scope="module")
def runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    server = start_local_runpod(tmp_path_factory.mktemp("e2e-runpod"), *FAST_ARGS)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def report() -> Iterator[Report]:
    collected = Report()
    yield collected
    collected.write()
