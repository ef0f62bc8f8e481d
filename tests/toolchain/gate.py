"""A dynamic resource whose create returns only once `parties` creates are in flight at the same time.

It proves how many RPCs the dynamic-provider host serves at once, without timing anything: if the host
runs fewer than `parties` creates together, the barrier breaks after `timeout_s` and every waiting create
fails with a message that says how many arrived.
"""

from __future__ import annotations

import threading
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ResourceProvider

_lock = threading.Lock()
_barriers: dict[int, threading.Barrier] = {}
_arrived: dict[int, int] = {}


def _arrive(parties: int) -> threading.Barrier:
    with _lock:
        _arrived[parties] = _arrived.get(parties, 0) + 1
        return _barriers.setdefault(parties, threading.Barrier(parties))


class GateProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        parties = int(props["parties"])
        barrier = _arrive(parties)
        try:
            barrier.wait(timeout=float(props["timeout_s"]))
        except threading.BrokenBarrierError:
            with _lock:
                arrived = _arrived[parties]
            raise RuntimeError(
                f"gate: {arrived} creates had arrived when the barrier for {parties} timed out: "
                "the provider host ran fewer of them at once"
            ) from None
        return CreateResult(id_=f"gate-{props['index']}", outs=dict(props))


class Gate(pulumi.dynamic.Resource, module="toolcheck", name="Gate"):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__(GateProvider(), name, props)
