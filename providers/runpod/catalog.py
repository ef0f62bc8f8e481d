"""Prices for check(): the live GPU catalog with a dated snapshot as the fallback.

The catalog is read at most once per provider process, and shared between processes through a small file
(`<cache>/catalog/<hash of the API URL>.json`, prices only, never a key) for TRAINSTACK_CATALOG_TTL_S
seconds (default 900; 0 turns the file off). Every `pulumi preview`/`up` starts a new provider process, so
without the file each one would spend a request and a round trip on prices that change a few times a year.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from facts.money import SNAPSHOT
from providers import settings
from providers.runpod import errors
from providers.runpod import settings as credentials

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

# Preview must stay quick when the API is down: one short, bounded attempt per process.
CATALOG_DEADLINE_S = 10.0
SNAPSHOT_DATE = SNAPSHOT.date
SNAPSHOT_PRICES = tuple(x for p in SNAPSHOT.gpus.values() for x in (p.secure, p.community))


@dataclass(frozen=True)
class PriceBook:
    """USD per GPU-hour by GPU id and cloud, plus where the figures came from."""

    gpus: dict[str, dict[str, float]]  # {"NVIDIA H100 80GB HBM3": {"SECURE": 3.99, "COMMUNITY": 2.69}}
    source: str  # "catalog" or "snapshot-2026-11-09 (<why>)"
    live: bool  # True when read from GET /v2/catalog/gpus in this process

    def gpu_hourly(self, gpu_type_id: str, cloud: str) -> float:
        """The price of one GPU-hour. A price the book lacks (a catalog without a community price, a GPU
        it does not list) is the dearest price known for that GPU here or in the dated snapshot, else the
        dearest of any GPU: a missing price must never price a pod at its bid or at 0."""
        price = self.gpus.get(gpu_type_id, {}).get(cloud)
        if price is not None and price > 0:
            return price
        snap = [(p.secure, p.community) for gid, p in SNAPSHOT.gpus.items() if gid == gpu_type_id]
        same_gpu = [*self.gpus.get(gpu_type_id, {}).values(), *(x for pair in snap for x in pair)]
        every = [*(x for t in self.gpus.values() for x in t.values()), *(SNAPSHOT_PRICES)]
        return max([p for p in same_gpu if p > 0] or [p for p in every if p > 0])


def snapshot(reason: str) -> PriceBook:
    """The dated fallback (facts.money.SNAPSHOT) as a price book, saying why it is used."""
    gpus = {gid: {"SECURE": p.secure, "COMMUNITY": p.community} for gid, p in SNAPSHOT.gpus.items()}
    return PriceBook(gpus, f"snapshot-{SNAPSHOT_DATE} ({reason})", live=False)


_cache: dict[str, PriceBook] = {}
_cache_lock = threading.Lock()


def price_book(client_factory: Callable[[], RunPodClient]) -> PriceBook:
    """The catalog: from this process, else the shared file while fresh, else one GET; else the snapshot."""
    with _cache_lock:
        if "book" not in _cache:
            ttl = ttl_s()
            path = shared_file(ttl)
            book = _read_shared(path, ttl) if path else None
            if book is None:
                book = _fetch(client_factory)
                if path and book.live:
                    _write_shared(path, book)
            _cache["book"] = book
        return _cache["book"]


def ttl_s() -> float:
    return settings.current().catalog_ttl_s


def shared_file(ttl: float | None = None) -> Path | None:
    """Where this API's catalog is shared between processes; None when turned off or unconfigured."""
    if (ttl_s() if ttl is None else ttl) == 0:
        return None
    try:
        url, _key = credentials.resolve_credentials()
    except errors.RunPodSettingsError:
        return None  # no key: _fetch falls back to the snapshot and says why
    return settings.current().cache_dir / "catalog" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"


def _read_shared(path: Path, ttl: float) -> PriceBook | None:
    try:
        raw = json.loads(path.read_text())
        age = time.time() - float(raw["fetched_at"])
        table = {
            str(gid): {str(cloud): float(price) for cloud, price in clouds.items()}
            for gid, clouds in raw["gpus"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, unreadable or not ours: read the catalog instead
    if not 0 <= age < ttl or not table:
        return None
    return PriceBook(table, "catalog", live=True)


def _write_shared(path: Path, book: PriceBook) -> None:
    """Best effort and atomic (write, then rename): a cache that cannot be written is only slower."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as f:
            tmp = f.name
            json.dump({"fetched_at": time.time(), "gpus": book.gpus}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp:
            Path(tmp).unlink(missing_ok=True)


def reset_cache() -> None:
    """Forget the cached catalog (tests; a long-lived process that wants fresh prices)."""
    with _cache_lock:
        _cache.clear()
        _dc_cache.clear()


def _fetch(client_factory: Callable[[], RunPodClient]) -> PriceBook:
    try:
        with client_factory() as client:
            gpus = client.list_gpu_types(deadline_s=CATALOG_DEADLINE_S)
    except errors.RunPodSettingsError:
        return snapshot("no RunPod API key in the provider environment")
    except errors.RunPodError as exc:
        return snapshot(f"catalog unavailable: {type(exc).__name__}")
    table = {
        g.id: {c: p for c, p in (("SECURE", g.price.secure), ("COMMUNITY", g.price.community)) if p}
        for g in gpus
    }
    return PriceBook(table, "catalog", live=True)


def data_center_ids(client_factory: Callable[[], RunPodClient]) -> frozenset[str] | None:
    """The data center ids RunPod's catalog lists, read once per process; None when it cannot be read
    (no key, API down): check() then leaves placement to RunPod rather than refusing on a guess."""
    with _cache_lock:
        if "data_centers" not in _dc_cache:
            try:
                with client_factory() as client:
                    ids: frozenset[str] | None = frozenset(
                        client.list_data_center_ids(deadline_s=CATALOG_DEADLINE_S)
                    )
            except errors.RunPodError:
                ids = None
            _dc_cache["data_centers"] = ids or None  # an empty list proves nothing either
        return _dc_cache["data_centers"]


_dc_cache: dict[str, frozenset[str] | None] = {}


# Storage has no catalog endpoint: it is always priced from the snapshot's rates.
volume_monthly = SNAPSHOT.volume_monthly
container_disk_monthly = SNAPSHOT.container_disk_monthly
