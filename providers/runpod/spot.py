"""Spot after GraphQL: RunPod rents interruptible pods only through GraphQL's `podRentInterruptable` (REST v2
has no spot field) and removed spot from its pricing docs in May 2026 (facts.sources.SPOT). Once GraphQL
answers 410 Gone (or 429 past the deadline), a pod asking `capacity: spot` is refused at preview with the
on-demand price, and `capacity: auto` rents on-demand, saying so in one line (docs/RUNPOD-CONTRACT.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CheckFailure

from facts import sources
from providers.common import is_unknown
from providers.runpod import errors

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

_lock = threading.Lock()
_gone: dict[str, str | None] = {}  # "graphql" -> why it is unusable (None: it answers); once a process
_said: set[str] = set()  # the auto fallback's line, once a process


def graphql_gone(client_factory: Callable[[], RunPodClient]) -> str | None:
    """Why GraphQL cannot rent spot now, asked once per provider process (one short query)."""
    with _lock:
        if "graphql" not in _gone:
            try:
                with client_factory() as client:
                    _gone["graphql"] = client.graphql_gone()
            except errors.RunPodError:  # no key or no answer says nothing about retirement: advisory
                _gone["graphql"] = None
        return _gone["graphql"]


def forget() -> None:
    """Drop the remembered answer (tests; a process asks once)."""
    with _lock:
        _gone.clear()
        _said.clear()


def on_demand_line(gpu: str, count: int, hourly_per_gpu: float, source: str) -> str:
    return f"on-demand {count} x {gpu} at ${hourly_per_gpu * count:,.2f}/h ({source})"


def capacity_failures(
    values: Mapping[str, Any], client_factory: Callable[[], RunPodClient], on_demand: Callable[[], str]
) -> list[CheckFailure]:
    """`capacity: spot` refused when GraphQL is gone, naming the on-demand alternative and its price;
    `capacity: auto` told, in one line, that it rents on-demand. Nothing while GraphQL answers."""
    capacity = values.get("capacity")
    if capacity not in ("spot", "auto") or is_unknown(capacity):
        return []
    why = graphql_gone(client_factory)
    if why is None:
        return []
    gone = (
        "RunPod's GraphQL, the only API that rents spot (podRentInterruptable; REST v2 has no spot), is "
        f"{why}, and RunPod removed spot from its pricing docs in May 2026 ({sources.SPOT})"
    )
    if capacity == "spot":
        return [CheckFailure("capacity", f"{gone}; set capacity: on_demand ({on_demand()})")]
    with _lock:
        first = "auto" not in _said
        _said.add("auto")
    if first:
        pulumi.log.warn(f"capacity: auto falls back to on-demand: {gone}; renting {on_demand()}")
    return []
