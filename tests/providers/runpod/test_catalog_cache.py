"""The GPU catalog shared between provider processes through a file, for TRAINSTACK_CATALOG_TTL_S seconds."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers import settings
from providers.errors import SettingsError
from providers.runpod import catalog
from tests.providers.runpod.fake_runpod import API_KEY, FakeRunPod, Fault

CATALOG = ("GET", "/v2/catalog/gpus")
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def _shared_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("TRAINSTACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TRAINSTACK_CATALOG_TTL_S", "900")
    monkeypatch.setenv("RUNPOD_API_URL", "http://runpod.test")
    monkeypatch.setenv("RUNPOD_API_KEY", API_KEY)
    catalog.reset_cache()
    yield tmp_path / "cache"
    catalog.reset_cache()


def new_process() -> None:
    catalog.reset_cache()  # what a new provider process starts with: nothing in memory


def test_a_second_process_reads_the_file_not_the_api() -> None:
    fake = FakeRunPod()
    first = catalog.price_book(fake.factory())
    new_process()
    second = catalog.price_book(fake.factory())
    assert fake.count(*CATALOG) == 1
    assert second.gpus == first.gpus and second.source == "catalog" and second.gpus[H100]["SECURE"] > 0


def test_the_file_holds_prices_only_never_the_key() -> None:
    catalog.price_book(FakeRunPod().factory())
    path = catalog.shared_file()
    assert path is not None and path.is_file()
    text = path.read_text()
    assert API_KEY not in text and "runpod.test" not in text
    assert set(json.loads(text)) == {"fetched_at", "gpus"}


def test_an_expired_file_is_read_again_from_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunPod()
    catalog.price_book(fake.factory())
    path = catalog.shared_file()
    assert path is not None
    stale = json.loads(path.read_text()) | {"fetched_at": time.time() - 901}
    path.write_text(json.dumps(stale))
    new_process()
    catalog.price_book(fake.factory())
    assert fake.count(*CATALOG) == 2
    assert json.loads(path.read_text())["fetched_at"] > stale["fetched_at"]  # refreshed for the next one


@pytest.mark.parametrize("content", ["", "{not json", '{"gpus": {}}', '{"fetched_at": "x", "gpus": 3}', "[]"])
def test_a_broken_file_is_ignored_and_replaced(content: str) -> None:
    path = catalog.shared_file()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text(content)
    fake = FakeRunPod()
    book = catalog.price_book(fake.factory())
    assert fake.count(*CATALOG) == 1 and book.source == "catalog"
    assert json.loads(path.read_text())["gpus"] == book.gpus


def test_another_api_url_has_its_own_file(monkeypatch: pytest.MonkeyPatch) -> None:
    first = catalog.shared_file()
    monkeypatch.setenv("RUNPOD_API_URL", "http://127.0.0.1:9")
    settings.reset()  # a new process reads the environment again
    assert catalog.shared_file() not in (None, first)


def test_a_snapshot_fallback_is_never_shared() -> None:
    fake = FakeRunPod()
    fake.fail(*CATALOG, *[Fault("connect")] * 50)
    book = catalog.price_book(fake.factory())
    assert not book.live and book.source.startswith("snapshot-")
    path = catalog.shared_file()
    assert path is not None and not path.exists()


def test_ttl_zero_turns_the_file_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSTACK_CATALOG_TTL_S", "0")
    assert catalog.shared_file() is None
    fake = FakeRunPod()
    catalog.price_book(fake.factory())
    new_process()
    catalog.price_book(fake.factory())
    assert fake.count(*CATALOG) == 2


@pytest.mark.parametrize("raw", ["soon", "-5"])
def test_a_bad_ttl_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("TRAINSTACK_CATALOG_TTL_S", raw)
    with pytest.raises(SettingsError, match="TRAINSTACK_CATALOG_TTL_S"):
        catalog.shared_file()


def test_an_unwritable_cache_only_costs_a_request(_shared_on: Path) -> None:
    _shared_on.mkdir(parents=True)
    (_shared_on / "catalog").write_text("a file where the folder should be")
    fake = FakeRunPod()
    book = catalog.price_book(fake.factory())
    assert book.source == "catalog" and fake.count(*CATALOG) == 1
    assert sorted(os.listdir(_shared_on)) == ["catalog"]
