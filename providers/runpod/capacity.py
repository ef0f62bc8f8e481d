"""Where the stack's GPUs are free now: RunPod's catalog stock per data center, read once per process, and
the pure choice of a data center from an ordered list of candidates (docs/FORECAST.md, "Where can it
run now?").

One read is `GET /v2/catalog/gpus/{id}?include=AVAILABILITY&product=POD|CLUSTER&count=<GPUs per
machine>&cloud=...` (REST v2's catalog; the GraphQL `lowestPrice.stockStatus` is not needed). Every pod,
cluster and volume of a preview asks for the same (GPU, count, product, cloud), so a preview spends one
request. The read is advisory: an error, a timeout or an answer that is not a GpuType never fails a
check; it is recorded as `read: false` with the reason, and the choice then keeps the stack's own order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from providers.common import is_unknown
from providers.runpod import errors

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

# A preview must stay quick when the API is slow: one short, bounded attempt (as for the price catalog).
CAPACITY_DEADLINE_S: Final = 5.0
LEVELS: Final = ("NONE", "LOW", "MEDIUM", "HIGH")  # RunPod's AvailabilityLevel, scarcest first


@dataclass(frozen=True)
class CapacityQuery:
    """What one read asks: a GPU type, its GPUs per machine, the product context and the cloud."""

    gpu_type_id: str
    gpu_count: int  # GPUs per pod (per node of a cluster): the count RunPod's `count` filter takes
    product: str  # "POD" or "CLUSTER": RunPod keeps stock per product context
    cloud: str  # "SECURE" or "COMMUNITY"


@dataclass(frozen=True)
class CapacityRead:
    """The answer: a level per data center listing the GPU type (RunPod's order), or why none was read."""

    query: CapacityQuery
    levels: tuple[tuple[str, str], ...]  # ((data center id, NONE|LOW|MEDIUM|HIGH), ...)
    error: str | None = None  # set when the read failed; `levels` is then empty

    def level(self, data_center_id: str) -> str | None:
        """The level in one data center: NONE when the answer leaves it out, None when nothing was read."""
        if self.error is not None:
            return None
        return dict(self.levels).get(data_center_id, "NONE")

    def to_output(self, candidates: Sequence[str], nodes: int, chosen: str | None) -> dict[str, Any]:
        """The `availability` property policies read: one row per candidate (every listed data center when
        the stack names none), in the stack's order."""
        ids = list(candidates) or [dc for dc, _ in self.levels]
        return {
            "gpu_type_id": self.query.gpu_type_id,
            "gpu_count": self.query.gpu_count,
            "nodes": nodes,
            "product": self.query.product,
            "read": self.error is None,
            "error": self.error,
            "data_centers": [{"id": dc, "availability": self.level(dc)} for dc in ids],
            "chosen": chosen,
        }


def choose(candidates: Sequence[str], read: CapacityRead | None, kept: str | None = None) -> str | None:
    """The data center to commit to: `kept` (where the stack already is) while it is still a candidate,
    else the first candidate the catalog does not read NONE, else the first candidate (RunPod's answer at
    create is the last word; a stale read must not make the stack unplaceable). None without candidates."""
    if kept and kept in candidates:
        return kept
    if not candidates:
        return None
    if read is not None:
        free = [dc for dc in candidates if read.level(dc) != "NONE"]
        if free:
            return free[0]
    return candidates[0]


def create_order(candidates: Sequence[str], read: CapacityRead | None) -> list[str]:
    """The order a create tries the candidates in: the stack's order, with those the catalog reads NONE
    moved last (kept, not dropped: the catalog's level is coarse and may lag the create's answer)."""
    if read is None:
        return list(candidates)
    empty = [dc for dc in candidates if read.level(dc) == "NONE"]
    return [dc for dc in candidates if dc not in empty] + empty


_cache: dict[CapacityQuery, CapacityRead] = {}
_lock = threading.Lock()


def read_capacity(client_factory: Callable[[], RunPodClient], query: CapacityQuery) -> CapacityRead:
    """The catalog's stock for `query`, read at most once per provider process (the lock makes the
    concurrent checks of one preview share the one request)."""
    with _lock:
        if query not in _cache:
            _cache[query] = _fetch(client_factory, query)
        return _cache[query]


def reset_cache() -> None:
    """Forget every read (tests; a long-lived process that wants a fresh read)."""
    with _lock:
        _cache.clear()


def _fetch(client_factory: Callable[[], RunPodClient], query: CapacityQuery) -> CapacityRead:
    try:
        with client_factory() as client:
            stock = client.gpu_stock(
                query.gpu_type_id,
                product=query.product,
                count=query.gpu_count,
                cloud=query.cloud,
                deadline_s=CAPACITY_DEADLINE_S,
            )
    except errors.RunPodSettingsError:
        return CapacityRead(query, (), "no RunPod API key in the provider environment")
    except errors.RunPodError as exc:
        return CapacityRead(query, (), f"the catalog could not be read ({type(exc).__name__})")
    except ValueError as exc:  # not JSON, or JSON that is not a GpuType (pydantic's ValidationError)
        return CapacityRead(query, (), f"the catalog's answer was not a GPU type ({_first_field(exc)})")
    if stock.id != query.gpu_type_id:
        return CapacityRead(query, (), f"the catalog answered for {stock.id!r}, not {query.gpu_type_id!r}")
    return CapacityRead(query, tuple((dc.id, dc.availability) for dc in stock.data_centers))


def _first_field(exc: ValueError) -> str:
    """The first failing field of a pydantic error (never its value: answers are not echoed)."""
    listed: Any = getattr(exc, "errors", None)
    if callable(listed):
        problems: list[Mapping[str, Any]] = listed()
        if problems:
            loc = ".".join(str(part) for part in problems[0].get("loc", ())) or "the answer"
            return f"{loc}: {problems[0].get('type', 'invalid')}"
    return "not JSON"


def stock_output(
    client_factory: Callable[[], RunPodClient],
    values: Mapping[str, Any],
    *,
    product: str,
    count: Any,
    nodes: Any,
    cloud: Any,
) -> dict[str, Any] | None:
    """The `availability` property of a pod or cluster's checked inputs (None while its GPU type, count or
    candidates are not known yet at preview): the read for its GPU type and count, one row per candidate."""
    gpu = values.get("gpu_type_id")
    chosen = values.get("data_center_id")
    listed = values.get("data_center_ids")
    raw = [*(listed if isinstance(listed, list) else []), *([chosen] if isinstance(chosen, str) else [])]
    if any(is_unknown(v) for v in (gpu, count, nodes, cloud, chosen, listed, *raw)):
        return None
    candidates = list(dict.fromkeys(str(dc) for dc in raw if dc))
    query = CapacityQuery(str(gpu), int(count), product, str(cloud))
    read = read_capacity(client_factory, query)
    return read.to_output(candidates, int(nodes), chosen if isinstance(chosen, str) and chosen else None)
