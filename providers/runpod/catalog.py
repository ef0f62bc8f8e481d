"""Prices for check(): the live GPU catalog (cached per process) with a dated snapshot as the fallback."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from providers.runpod import errors
from providers.runpod.client import RunPodClient

SNAPSHOT_PATH = Path(__file__).parent / "data" / "prices-2026-11-09.json"
# Preview must stay quick when the API is down: one short, bounded attempt per process.
CATALOG_DEADLINE_S = 10.0
HOURS_PER_MONTH = 730.0
_FIRST_TB_GB = 1000  # RunPod sizes volumes in decimal GB; "first TB" = first 1000 GB


@dataclass(frozen=True)
class PriceBook:
    """USD per GPU-hour by GPU id and cloud, plus where the figures came from."""

    gpus: dict[str, dict[str, float]]  # {"NVIDIA H100 80GB HBM3": {"SECURE": 3.99, "COMMUNITY": 2.69}}
    source: str  # "catalog" or "snapshot-2026-11-09 (<why>)"
    live: bool  # True when read from GET /v2/catalog/gpus in this process

    def gpu_hourly(self, gpu_type_id: str, cloud: str) -> float | None:
        return self.gpus.get(gpu_type_id, {}).get(cloud)


@dataclass(frozen=True)
class StorageRates:
    volume_first_tb: float  # USD per GB-month, first 1 TB of a network volume
    volume_beyond: float  # USD per GB-month beyond 1 TB
    container_disk: float  # USD per GB-month of container disk


def _read_snapshot() -> tuple[str, dict[str, dict[str, float]], StorageRates]:
    raw = json.loads(SNAPSHOT_PATH.read_text())
    gpus = {
        gid: {"SECURE": float(p["secure"]), "COMMUNITY": float(p["community"])}
        for gid, p in raw["gpus"].items()
    }
    vol = raw["network_volume_usd_per_gb_month"]
    rates = StorageRates(
        float(vol["first_tb"]), float(vol["beyond_first_tb"]), float(raw["container_disk_usd_per_gb_month"])
    )
    return str(raw["date"]), gpus, rates


SNAPSHOT_DATE, _SNAPSHOT_GPUS, STORAGE = _read_snapshot()


def snapshot(reason: str) -> PriceBook:
    return PriceBook(dict(_SNAPSHOT_GPUS), f"snapshot-{SNAPSHOT_DATE} ({reason})", live=False)


_cache: dict[str, PriceBook] = {}
_cache_lock = threading.Lock()


def price_book(client_factory: Callable[[], RunPodClient]) -> PriceBook:
    """The live catalog, read once per provider process; the snapshot when it cannot be read."""
    with _cache_lock:
        if "book" not in _cache:
            _cache["book"] = _fetch(client_factory)
        return _cache["book"]


def reset_cache() -> None:
    """Forget the cached catalog (tests; a long-lived process that wants fresh prices)."""
    with _cache_lock:
        _cache.clear()


def _fetch(client_factory: Callable[[], RunPodClient]) -> PriceBook:
    try:
        with client_factory() as client:
            gpus = client.list_gpu_types(deadline_s=CATALOG_DEADLINE_S)
    except errors.ConfigError:
        return snapshot("no RunPod API key in the provider environment")
    except errors.RunPodError as exc:
        return snapshot(f"catalog unavailable: {type(exc).__name__}")
    table = {
        g.id: {c: p for c, p in (("SECURE", g.price.secure), ("COMMUNITY", g.price.community)) if p}
        for g in gpus
    }
    return PriceBook(table, "catalog", live=True)


def volume_monthly(size_gb: int) -> float:
    """Network volume: $0.07/GB-month for the first TB, $0.05 beyond (billed even when detached)."""
    first = min(size_gb, _FIRST_TB_GB)
    return round(first * STORAGE.volume_first_tb + (size_gb - first) * STORAGE.volume_beyond, 4)


def container_disk_monthly(gb: int) -> float:
    return round(gb * STORAGE.container_disk, 4)
