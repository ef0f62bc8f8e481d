"""REST v2 routes beyond the core lifecycle: container registry credentials, pod logs (SSE) and billing."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from emulator import billing
from emulator.models import RegistryRecord
from emulator.pods import get_pod
from emulator.problems import ApiError
from emulator.routes_v2 import body_of, checked_query, no_content, world_of
from emulator.views import iso
from emulator.world import World, new_id

router = APIRouter(prefix="/v2", dependencies=[Depends(checked_query)])


# -- container registry credentials ----------------------------------------------------------------


def _registry(record: RegistryRecord) -> dict[str, Any]:
    # "`username` and `password` are never included in the response — credentials are write-only"
    return {"id": record.id, "name": record.name}


def _get_registry(world: World, registry_id: str) -> RegistryRecord:
    record = world.registries.get(registry_id)
    if record is None:
        raise ApiError(404, f"Container registry credential {registry_id!r} was not found.")
    return record


@router.get("/registries")
async def list_registries(request: Request) -> dict[str, Any]:
    return {"registries": [_registry(r) for r in world_of(request).registries.values()]}


@router.post("/registries", status_code=201)
async def create_registry(request: Request) -> dict[str, Any]:
    world = world_of(request)
    body = await body_of(request, "CreateRegistryRequest")
    record = RegistryRecord(id=new_id(), name=body["name"], created_at=world.now())
    world.save(record)
    world.audit("registry.create", "registry", record.id, record.name)  # never the credentials
    return _registry(record)


@router.get("/registries/{registry_id}")
async def get_registry(request: Request, registry_id: str) -> dict[str, Any]:
    return _registry(_get_registry(world_of(request), registry_id))


@router.delete("/registries/{registry_id}", status_code=204)
async def delete_registry(request: Request, registry_id: str) -> Response:
    world = world_of(request)
    record = _get_registry(world, registry_id)
    # deleteRegistry: "Rejected if any pod currently uses this credential to pull its image."
    users = sorted(p.id for p in world.pods.values() if p.registry == record.id)
    if users:
        raise ApiError(400, f"Registry credential {record.id} is used by pod(s) {', '.join(users)}.")
    world.forget(record)
    world.audit("registry.delete", "registry", record.id, record.name)
    return no_content()


# -- pod logs ----------------------------------------------------------------------------------------


def _log_events(world: World, pod_id: str, source: str | None) -> list[tuple[float, int, str, str]]:
    """(ts, seq, source, line), oldest first: `system` from the pod's lifecycle on the emulator's record,
    `container` from its emulated host's output (state dir hosts/<pod id>/host.log)."""
    events: list[tuple[float, int, str, str]] = []
    if source in (None, "system"):
        for seq, at, event in world.store.audit_of(pod_id):
            events.append((at, seq, "system", f"{event.removeprefix('pod.')}"))
        pod = world.pods.get(pod_id)
        if pod is not None and pod.halted is None and world.now() >= world.running_since(pod):
            events.append((world.running_since(pod), 1 << 40, "system", "RUNNING"))
    host_log = world.settings.state_dir / "hosts" / pod_id / "host.log"
    if source in (None, "container") and host_log.is_file():
        at = host_log.stat().st_mtime
        for n, line in enumerate(host_log.read_text(errors="replace").splitlines()):
            events.append((at, (1 << 41) + n, "container", line))
    return sorted(events)


def _cursor(text: str) -> tuple[float, int]:
    """A resume point: our event id `<ts>/<seq>`, or an RFC 3339 time (seq 0 resumes after all of it)."""
    stamp, _, seq = text.partition("/")
    if seq and not seq.isdigit():
        raise ApiError(
            422, "Last-Event-ID is not an event id of this stream.", errors=["header Last-Event-ID"]
        )
    return billing.parse_time("since", stamp), int(seq) if seq else 1 << 62


@router.get("/pods/{pod_id}/logs")
async def pod_logs(request: Request, pod_id: str) -> Response:
    """getPodLogs as Server-Sent Events. The emulator has no live lines to follow, so the stream ends after
    the backfill (`tail` lines, or everything after `since` / `Last-Event-ID`)."""
    world, query = world_of(request), request.state.query
    get_pod(world, pod_id)
    events = _log_events(world, pod_id, query.get("source"))
    if "since" in query:
        billing.parse_time("since", query["since"])  # a malformed `since` is 422 even when ignored
    resume = request.headers.get("last-event-id")
    if resume is not None:
        _cursor(resume)  # an empty or malformed Last-Event-ID is refused, not ignored
    resume = resume or query.get("since")
    if resume:  # "Takes precedence over `since` and `tail`"
        after_ts, after_seq = _cursor(resume)
        # Microseconds, as the ids print them: a float read back from text may differ in the last bits.
        events = [e for e in events if (round(e[0], 6), e[1]) > (round(after_ts, 6), after_seq)]
    else:
        tail = query.get("tail", 100)
        events = events[-tail:] if tail else []
    chunks = []
    for ts, seq, source, line in events:
        stamp = iso(ts)
        payload = json.dumps({"ts": stamp, "source": source, "line": line})
        chunks.append(f"id: {stamp}/{seq:012d}\ndata: {payload}\n\n")
    headers = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
    return Response("".join(chunks), media_type="text/event-stream", headers=headers)


# -- billing -----------------------------------------------------------------------------------------


@router.get("/billing/pods")
async def pod_billing(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return billing.response(world.segments, "pod", request.state.query, world.now())


@router.get("/billing/clusters")
async def cluster_billing(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return billing.response(world.segments, "cluster", request.state.query, world.now())


@router.get("/billing/network-volumes")
async def volume_billing(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return billing.response(world.segments, "volume", request.state.query, world.now())
