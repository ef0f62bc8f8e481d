"""The environment knobs: parsed once into Settings, every bad value named.

docs/OPERATING.md's knob table is held against `KNOBS` by tests/test_docs_defaults.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers import settings
from providers.errors import SettingsError, TrainstackError
from providers.settings import Settings


def test_defaults() -> None:
    knobs = Settings.from_env({"HOME": "/home/u"})
    assert (knobs.poll_interval_s, knobs.ready_timeout_s, knobs.http_timeout_s, knobs.http_deadline_s) == (
        10.0,
        1200.0,
        30.0,
        180.0,
    )
    assert knobs.rate_limit_per_min == 60 and knobs.catalog_ttl_s == 900.0
    assert knobs.known_hosts_dir == knobs.cache_dir / "known_hosts"  # one cache rule, no bypass
    assert knobs.ssh_key is None and knobs.runpod_api_url is None and knobs.s3_endpoint_url is None
    assert knobs.read_only is False and Settings.from_env({"TRAINSTACK_READ_ONLY": "1"}).read_only


def test_the_cache_rule_moves_known_hosts_too() -> None:
    knobs = Settings.from_env({"TRAINSTACK_CACHE": "/c"})
    assert knobs.cache_dir == Path("/c") and knobs.known_hosts_dir == Path("/c/known_hosts")
    assert Settings.from_env({"TRAINSTACK_KNOWN_HOSTS_DIR": "/k"}).known_hosts_dir == Path("/k")


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("TRAINSTACK_POLL_INTERVAL_S", "soon"),
        ("TRAINSTACK_READY_TIMEOUT_S", "0"),
        ("TRAINSTACK_HTTP_TIMEOUT_S", "-1"),
        ("RUNPOD_RATE_LIMIT_PER_MIN", "1.5"),
        ("RUNPOD_RATE_LIMIT_PER_MIN", "0"),
        ("TRAINSTACK_CATALOG_TTL_S", "-5"),
        ("TRAINSTACK_READ_ONLY", "yes"),
    ],
)
def test_a_bad_value_names_the_variable_and_is_a_trainstack_error(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name) as caught:
        Settings.from_env({name: raw})
    assert isinstance(caught.value, TrainstackError)


def test_the_key_is_never_in_the_repr() -> None:
    assert "sekrit" not in repr(Settings.from_env({"RUNPOD_API_KEY": "sekrit"}))


def test_read_once_until_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "7")
    assert settings.current().poll_interval_s == 7.0
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "8")
    assert settings.current().poll_interval_s == 7.0
    settings.reset()
    assert settings.current().poll_interval_s == 8.0
