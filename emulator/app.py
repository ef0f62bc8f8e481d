"""Assemble the server: world, routers, problem+json error handlers, the admission layer, and uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from emulator import admin, graphql_api, netslot, routes_account, routes_catalog, routes_v2
from emulator.admission import Admission, Counters
from emulator.catalog import Catalog
from emulator.config import Settings
from emulator.hostnet import Bridge
from emulator.hosts import Hosts, hosts_unavailable, make_hosts
from emulator.netslot import NetSlot
from emulator.problems import ApiError, problem
from emulator.spec import Spec
from emulator.store import Store
from emulator.world import World

log = logging.getLogger("emulator")


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return problem(exc)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return problem(ApiError(exc.status_code, str(exc.detail), headers=dict(exc.headers or {})))


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [f"{'/'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()]
    return problem(ApiError(422, "the request does not validate", errors=errors))


ROUTERS = (
    routes_v2.router,
    routes_account.router,
    routes_catalog.router,
    graphql_api.router,
    admin.router,
)


def create_app(settings: Settings) -> tuple[ASGIApp, World]:
    """The ASGI app to serve (the admission layer around FastAPI) and its world, for tests and `serve`."""
    store = Store(settings.state_dir)
    settings, hosts = _hosts(settings, store)
    world = World(settings, store, Catalog.load(), hosts)
    if lost := world.lose_what_lived_in_memory():
        log.warning("restarted with hosts; read as lost (refresh, then up): %s", ", ".join(lost))
    spec = Spec(settings.spec_path)
    api = FastAPI(title="local RunPod", docs_url=None, redoc_url=None, openapi_url=None)
    for router in ROUTERS:
        api.include_router(router)
    api.add_exception_handler(ApiError, _api_error)
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(RequestValidationError, _validation_error)
    counters = Counters()
    admission = Admission(api, world, spec, counters, implemented(ROUTERS, spec))
    api.state.world, api.state.spec, api.state.counters, api.state.admission_buckets = (
        world,
        spec,
        counters,
        admission.buckets,
    )
    return admission, world


def implemented(routers: tuple[APIRouter, ...], spec: Spec) -> set[tuple[str, str]]:
    """(METHOD, spec template) of every documented operation some route answers."""

    def shape(template: str) -> str:
        return re.sub(r"\{[^}]+\}", "{}", template)

    by_shape = {shape(op.template): op.template for op in spec.operations}
    found = set()
    for route in (r for router in routers for r in router.routes):
        if isinstance(route, APIRoute) and shape(route.path) in by_shape:
            found |= {(m, by_shape[shape(route.path)]) for m in route.methods or ()}
    return found


HOSTS_TICK_S = 0.1  # pods turn RUNNING by the clock alone: look this often for hosts to make or remove


def _hosts(settings: Settings, store: Store) -> tuple[Settings, Hosts]:
    """The host backend, and the settings with the address slot its hosts use (emulator/netslot.py):
    another local RunPod on this machine has its own slot, bridge and subnets, so both work."""
    claim = None
    if hosts_unavailable(settings.hosts) is None:
        last = store.get_setting("net_slot")
        claim = netslot.claim(preferred=int(last) if last is not None else None)
        store.set_setting("net_slot", claim.slot.index)
        settings = settings.model_copy(update={"net_slot": claim.slot.index})
    slot = NetSlot(settings.net_slot)
    bridge = Bridge(settings.hosts_bridge or slot.bridge_name, settings.hosts_bridge_cidr or slot.bridge_cidr)
    hosts = make_hosts(
        settings.hosts,
        settings.state_dir,
        bridge,
        settings.hosts_node_path,
        settings.hosts_env,
        settings.hosts_ssh_keys,
        claim,
    )
    return settings, hosts


async def _serve(server: uvicorn.Server, sock: socket.socket, world: World) -> None:
    async def ticker() -> None:
        while True:
            world.tick()  # settles clock-driven changes and syncs hosts
            await asyncio.sleep(HOSTS_TICK_S)

    task = asyncio.create_task(ticker()) if world.hosts.enabled else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio only sets TCP_NODELAY on such sockets, and without it
    # uvicorn's separate header and body writes meet delayed ACKs and every reply takes ~40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def serve(settings: Settings, access_log: bool = False) -> None:
    """Bind first (port 0 picks a free one), publish `server.json`, then serve until signalled."""
    app, world = create_app(settings)
    sock = _bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "host": settings.host,
        "port": port,
        "baseUrl": f"http://{settings.host}:{port}",
    }
    marker = settings.state_dir / "server.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(info), encoding="utf-8")
    tmp.replace(marker)  # atomic, so a reader never sees half a file
    config = uvicorn.Config(app, log_level=settings.log_level, access_log=access_log, lifespan="off")
    # uvicorn re-raises SIGTERM after its graceful shutdown; with the default action that would end the
    # process before the cleanup below (hosts, store) runs, so make it an ordinary exit instead.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        asyncio.run(_serve(uvicorn.Server(config), sock, world))
    finally:
        world.hosts.close()  # a stopped local RunPod leaves no namespace or node process behind
        world.store.set_setting("clock", world.now())
        world.store.close()
        marker.unlink(missing_ok=True)
