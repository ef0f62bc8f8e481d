"""Shared fixtures: a local RunPod (`local_runpod`) and a moto S3 server (`moto_s3`), one per session.

`local_runpod` yields `harness.local.LocalRunPod`: `.base_url`, `.api_key`, `.env()` (RUNPOD_API_URL and
RUNPOD_API_KEY), `.client()` (an authenticated httpx.Client) and `.admin` (faults, limits, clock, preempt,
out_of_band, audit, counters, live, reset). Pods reach RUNNING in about 1 s of wall time; the rate limit is
lifted; the spend limit is RunPod's default $80/h (raise it with `admin.limits(spendLimit=...)`).
Tests that change faults or limits should put them back (or call `admin.reset()`, which also deletes
every resource).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.local import FAST_ARGS, LocalRunPod, MotoS3, start_local_runpod, start_moto_s3
from providers import settings


@pytest.fixture(scope="session")
def local_runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    server = start_local_runpod(tmp_path_factory.mktemp("local-runpod"), *FAST_ARGS)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory, monkeypatch_session: None) -> Iterator[str]:
    """The endpoint URL of a moto S3 server; AWS_* test credentials are set for the session."""
    server: MotoS3 = start_moto_s3(Path(tmp_path_factory.mktemp("moto")) / "moto.log")
    yield server.endpoint_url
    server.stop()


@pytest.fixture(scope="session")
def monkeypatch_session() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(autouse=True, scope="session")
def _catalog_read_every_time() -> Iterator[None]:
    """Every provider process reads the GPU catalog itself, as with the shared catalog file off, so one
    test's prices (or faults) never reach another through ~/.cache. tests/providers/test_catalog_cache.py
    and tests/e2e/test_catalog_shared.py turn the file on where they test it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINSTACK_CATALOG_TTL_S", "0")
        yield


@pytest.fixture(autouse=True)
def _settings_read_per_test() -> Iterator[None]:
    """Each test reads the environment afresh (a provider process reads it once, at first use)."""
    settings.reset()
    yield
    settings.reset()
