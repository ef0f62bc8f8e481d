"""A local RunPod inside the test process: the emulator's ASGI app behind a synchronous httpx transport.

For tests of our clients against the local RunPod that need no server process, no port and no Pulumi: the
app (admission layer included, so keys, counters and the 403s are RunPod's) runs on one event loop in a
background thread, and `RunPodClient(..., transport=rp.transport)` talks to it as it would over the wire.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp

from emulator.app import create_app
from emulator.config import Settings
from emulator.world import World
from providers.runpod.client import RunPodClient
from providers.runpod.ratelimit import TokenBucket

BASE_URL = "http://local-runpod.test"


class AsgiTransport(httpx.BaseTransport):
    """httpx's sync transport over an ASGI app run by a portal; closing a client leaves it open."""

    def __init__(self, app: ASGIApp, portal: BlockingPortal) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()

        async def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            forwarded = httpx.Request(request.method, request.url, headers=request.headers, content=body)
            response = await self._inner.handle_async_request(forwarded)
            return response.status_code, response.headers.raw, await response.aread()

        status, headers, content = self._portal.call(call)
        return httpx.Response(status, headers=headers, content=content, request=request)

    def close(self) -> None:
        """Clients are made per call and closed after it; the app outlives them (see `in_process`)."""


@dataclass
class InProcessRunPod:
    """The app's world (for setup and assertions), its request counters and the transport to pass."""

    world: World
    counters: Any
    transport: AsgiTransport
    base_url: str = BASE_URL

    def client(self, key: str, **kwargs: Any) -> RunPodClient:
        """Our RunPod client on this app, with a limiter of its own: the process-wide one paces at 60/min
        (a test's few calls would wait on requests other tests made)."""
        kwargs.setdefault("limiter", TokenBucket(100_000, burst=1000))
        kwargs.setdefault("deadline_s", 1.0)
        return RunPodClient(self.base_url, key, transport=self.transport, **kwargs)

    def writes(self) -> dict[str, dict[str, int]]:
        """Every endpoint a write method reached, by outcome (`POST /v2/pods: {"403": 1}`)."""
        view: dict[str, dict[str, int]] = self.counters.view()["endpoints"]
        return {e: c for e, c in view.items() if not e.startswith(("GET ", "HEAD "))}


@contextlib.contextmanager
def in_process(state_dir: Path, **settings: Any) -> Iterator[InProcessRunPod]:
    """A fresh local RunPod with a frozen clock (the admin API's `advance` is `world.clock.advance`)."""
    settings.setdefault("rate_per_minute", 100_000)  # quotas are tested on their own (tests/emulator)
    app, world = create_app(Settings(state_dir=state_dir, time_scale=0, hosts="off", **settings))
    with start_blocking_portal() as portal:
        yield InProcessRunPod(world, _fastapi_of(app).state.counters, AsgiTransport(app, portal))
    world.store.close()


def _fastapi_of(app: ASGIApp) -> Any:
    """The FastAPI app inside the admission layer (it holds the counters in its state)."""
    return getattr(app, "app", app)
