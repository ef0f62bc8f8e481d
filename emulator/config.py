"""Settings of one local RunPod server: timings, limits, faults at start, where state lives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from common.cachedir import cache_dir
from emulator.keys import DEFAULT_API_KEY as DEFAULT_API_KEY  # re-exported: the name callers know
from emulator.keys import Access
from facts.limits import RATE_PER_MINUTE
from facts.money import DEFAULT_SPEND_LIMIT_PER_HOUR

DEFAULT_READ_ONLY_KEY = "local-runpod-read-only-key"
DEFAULT_SPEND_LIMIT = DEFAULT_SPEND_LIMIT_PER_HOUR
DEFAULT_RATE_PER_MINUTE = RATE_PER_MINUTE


def spec_candidates() -> list[Path]:
    """Where RunPod's REST v2 spec is looked for, in order. It is RunPod's file, so the repo does not ship
    a copy: `TRAINSTACK_OPENAPI_V2`, the workplace's reference copy beside the repo, the user cache."""
    found = [Path(p) for p in [os.environ.get("TRAINSTACK_OPENAPI_V2")] if p]
    repo = Path(__file__).resolve().parent.parent
    return [
        *found,
        repo.parent / "shared" / "reference" / "runpod" / "openapi-v2.json",
        cache_dir() / "openapi-v2.json",
    ]


def default_spec_path() -> Path:
    """The first candidate that exists (or the first one, so the error names where it was expected)."""
    candidates = spec_candidates()
    return next((p for p in candidates if p.is_file()), candidates[0])


class Timing(BaseModel):
    """How long (in emulated seconds) a pod spends in each phase of its start."""

    model_config = ConfigDict(frozen=True)

    provisioning_s: float = Field(default=10.0, ge=0)
    starting_s: float = Field(default=5.0, ge=0)
    # RunPod reports RUNNING before `runtime` and the port map exist (observed by dstack and SkyPilot's RunPod
    # backends).
    runtime_lag_s: float = Field(default=3.0, ge=0)
    # The historical spot warning: SIGTERM, then SIGKILL 5 s later (docs.runpod.io/pods/pricing, spot, before
    # 2026-05-06).
    preempt_notice_s: float = Field(default=5.0, ge=0)


class Settings(BaseModel):
    """Everything a server is started with; the admin API may change limits and faults later."""

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    state_dir: Path = Path(".state/local-runpod/emulator")
    spec_path: Path = Field(default_factory=default_spec_path)
    api_key: str = DEFAULT_API_KEY
    # A valid key without write access (RunPod's read-only keys): reads pass, writes get 403.
    read_only_key: str = DEFAULT_READ_ONLY_KEY
    # Restricted keys (emulator/keys.py): key -> access per API (`pods`, `billing`, `graphql`, ...); an API
    # not named is "none". RunPod makes these in its console only; here a test or
    # `$RUNPOD_RESTRICTED_API_KEYS` (JSON) names them.
    restricted_keys: dict[str, dict[str, Access]] = Field(default_factory=dict, repr=False)
    # 1.0 is real time; 0 freezes the clock so only the admin API moves it.
    time_scale: float = Field(default=1.0, ge=0)
    timing: Timing = Timing()
    # "image": first boots take ~33-170 s by image size and cache (emulator/latency.py); "fixed": `timing`.
    latency_model: Literal["fixed", "image"] = "fixed"
    image_gb: float = Field(default=16.0, gt=0)  # size assumed for images emulator/latency.py does not know
    offer_spot: bool = False
    # RunPod's GraphQL: "on", "gone" (410 to every request) or "limited" (429 with Retry-After); the admin
    # API's limits (`graphql`, `graphqlRetryAfterS`) change it later.
    graphql: Literal["on", "gone", "limited"] = "on"
    graphql_retry_after_s: int = Field(default=3600, ge=0)
    spend_limit: float = Field(default=DEFAULT_SPEND_LIMIT, ge=0)
    balance: float = Field(default=1000.0, ge=0)
    rate_per_minute: int = Field(default=DEFAULT_RATE_PER_MINUTE, ge=1)
    rate_per_hour: int | None = Field(default=None, ge=1)  # None: scaled from the minute quota
    rate_per_day: int | None = Field(default=None, ge=1)
    # Start with every create refused for capacity, as on a day when RunPod has none.
    no_capacity: bool = False
    error_rate: float = Field(default=0.0, ge=0, le=1)
    latency_ms: int = Field(default=0, ge=0)
    seed: int = 0
    log_level: str = "warning"
    # Emulated hosts (emulator/hosts.py): "auto" makes them when root and sshd allow, "off" never.
    hosts: Literal["auto", "on", "off"] = "off"
    # The bridge every host joins (created, and removed at exit, if missing) and its host-side address, for
    # services the nodes use (S3). Empty: this server's own, tsbrN and 10.250.N.1/24 (emulator/netslot.py).
    hosts_bridge: str = ""
    hosts_bridge_cidr: str = ""
    net_slot: int = Field(default=0, ge=0, lt=64)  # which addresses hosts use (emulator/netslot.py)
    hosts_node_path: tuple[str, ...] = ()  # prepended to PATH in node logins (what the "image" provides)
    hosts_env: dict[str, str] = Field(default_factory=dict)  # extra node login env (the "image's" ENV)
    hosts_ssh_keys: tuple[str, ...] = ()  # public keys nodes accept besides the account's ssh keys
