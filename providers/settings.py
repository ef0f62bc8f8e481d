"""trainstack's environment knobs, parsed once per process into one frozen `Settings` (standard library only).

Every knob is listed in `KNOBS` with its default and what it tunes; docs/OPERATING.md's settings table
is checked against it (tests/test_docs_defaults.py). A malformed value raises `SettingsError` naming the
variable. Knobs read by the host binaries themselves (the Go language host, the dynamic-provider host
script, scripts/env.sh) are listed in `HOST_KNOBS`: they act before any Python of ours runs.

Tests change the environment with monkeypatch and then call `reset()` so the next `current()` reads it again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from common.cachedir import cache_dir as _cache_dir_rule
from providers.errors import SettingsError

DEFAULT_API_URL: Final = "https://api.runpod.io"
T = TypeVar("T", int, float)


@dataclass(frozen=True)
class Knob:
    """One environment variable: its default as docs/OPERATING.md states it, and what it tunes."""

    env: str
    default: str
    what: str


KNOBS: Final = (
    Knob("TRAINSTACK_POLL_INTERVAL_S", "10", "seconds between readiness polls"),
    Knob("TRAINSTACK_READY_TIMEOUT_S", "1200", "how long a pod or cluster may take to become ready"),
    Knob("TRAINSTACK_HTTP_TIMEOUT_S", "30", "per RunPod request"),
    Knob("TRAINSTACK_HTTP_DEADLINE_S", "180", "retries of one RunPod call"),
    Knob("RUNPOD_RATE_LIMIT_PER_MIN", "60", "the client's minute window"),
    Knob("RUNPOD_RATE_LIMIT_PER_HOUR", "3000", "the client's hour window (unset: 50x the minute quota)"),
    Knob("RUNPOD_RATE_LIMIT_PER_DAY", "50000", "the client's day window (unset: 833.3x the minute quota)"),
    Knob("TRAINSTACK_CATALOG_TTL_S", "900", "how long provider processes share a GPU catalog read; 0 = off"),
    Knob("TRAINSTACK_KNOWN_HOSTS_DIR", "<cache>/known_hosts", "the stacks' own SSH known_hosts files"),
    Knob("TRAINSTACK_SSH_KEY", "ssh's default", "private key delivery uses; never a resource input"),
    Knob("TRAINSTACK_READ_ONLY", "0", "1: a preview; every RunPod write is refused before it is sent"),
)
HOST_KNOBS: Final = (
    Knob("TRAINSTACK_PROVIDER_WORKERS", "64", "RPCs the provider host serves at once"),
    Knob("TRAINSTACK_EARLY_PROVIDER", "1", "0 stops the language host starting the provider process early"),
    Knob("TRAINSTACK_ENGINE_CHECK_S", "10", "how often the hosts ask whether the engine is still there"),
    Knob("PULUMI_PARALLEL", "64", "set by scripts/env.sh"),
    Knob("GOGC", "200", "the Go collector of the CLI and language host; set by scripts/env.sh"),
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What the environment says, parsed and checked; defaults are the `KNOBS` defaults."""

    runpod_api_url: str | None  # RUNPOD_API_URL; None: stack config runpod:apiUrl, else DEFAULT_API_URL
    runpod_api_key: str | None = field(repr=False)  # RUNPOD_API_KEY; never printed
    poll_interval_s: float
    ready_timeout_s: float
    http_timeout_s: float
    http_deadline_s: float
    rate_limit_per_min: int
    rate_limit_per_hour: int | None  # None: the spec example's ratio to the minute quota (ratelimit.py)
    rate_limit_per_day: int | None
    catalog_ttl_s: float  # 0 turns the shared catalog file off
    cache_dir: Path  # TRAINSTACK_CACHE, else $XDG_CACHE_HOME/trainstack, else ~/.cache/trainstack
    known_hosts_dir: Path
    ssh_key: Path | None  # checked where it is used (delivery), so a preview without delivery never fails
    s3_endpoint_url: str | None  # AWS_ENDPOINT_URL_S3, the standard AWS variable
    # TRAINSTACK_READ_ONLY=1: this process previews with a read-only key (docs/PREVIEW-REPORT.md, "Keys");
    # a write is refused by the client itself, so even a key that could write spends nothing.
    read_only: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        cache = _cache_dir_rule(env)
        return cls(
            runpod_api_url=_text(env, "RUNPOD_API_URL"),
            runpod_api_key=_text(env, "RUNPOD_API_KEY"),
            poll_interval_s=_seconds(env, "TRAINSTACK_POLL_INTERVAL_S", 10.0),
            ready_timeout_s=_seconds(env, "TRAINSTACK_READY_TIMEOUT_S", 1200.0),
            http_timeout_s=_seconds(env, "TRAINSTACK_HTTP_TIMEOUT_S", 30.0),
            http_deadline_s=_seconds(env, "TRAINSTACK_HTTP_DEADLINE_S", 180.0),
            rate_limit_per_min=_parse(
                env,
                "RUNPOD_RATE_LIMIT_PER_MIN",
                60,
                int,
                lambda v: v > 0,
                "a positive integer (requests/min)",
            ),
            rate_limit_per_hour=_optional_count(env, "RUNPOD_RATE_LIMIT_PER_HOUR", "requests/hour"),
            rate_limit_per_day=_optional_count(env, "RUNPOD_RATE_LIMIT_PER_DAY", "requests/day"),
            catalog_ttl_s=_parse(
                env,
                "TRAINSTACK_CATALOG_TTL_S",
                900.0,
                float,
                lambda v: v >= 0,
                "0 or more seconds (0 turns the shared file off)",
            ),
            cache_dir=cache,
            known_hosts_dir=Path(_text(env, "TRAINSTACK_KNOWN_HOSTS_DIR") or cache / "known_hosts"),
            ssh_key=_path(env, "TRAINSTACK_SSH_KEY"),
            s3_endpoint_url=_text(env, "AWS_ENDPOINT_URL_S3"),
            read_only=_parse(env, "TRAINSTACK_READ_ONLY", 0, int, lambda v: v in (0, 1), "0 or 1") == 1,
        )


def _text(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = _text(env, name)
    return Path(raw).expanduser() if raw else None


def _parse(
    env: Mapping[str, str],
    name: str,
    default: T,
    kind: Callable[[str], T],
    ok: Callable[[T], bool],
    want: str,
) -> T:
    raw = _text(env, name)
    if raw is None:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name} must be {want}; got {raw!r}") from None
    if not ok(value):
        raise SettingsError(f"{name} must be {want}; got {raw!r}")
    return value


def _optional_count(env: Mapping[str, str], name: str, unit: str) -> int | None:
    if _text(env, name) is None:
        return None
    return _parse(env, name, 1, int, lambda v: v > 0, f"a positive integer ({unit})")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    return _parse(env, name, default, float, lambda v: v > 0, "a positive number of seconds, e.g. 30")


_lock = threading.Lock()
_current: list[Settings] = []


def current() -> Settings:
    """This process's settings, read from the environment on first use."""
    with _lock:
        if not _current:
            _current.append(Settings.from_env(os.environ))
        return _current[0]


def known_hosts_file(stack: str) -> str:
    """The known_hosts file delivery pins a stack's node host keys in, and every later SSH reads (here, not in
    components/delivery.py, so scripts/watch and the supervisor read it without importing pulumi)."""
    return str(current().known_hosts_dir / stack)


def reset() -> None:
    """Forget the settings read so far (tests that change the environment)."""
    with _lock:
        _current.clear()
