"""The admin API under /_admin: faults, limits, clock, out-of-band events, audit, counters, live view."""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from emulator.admission import Counters
from emulator.faults import FaultConfig
from emulator.pods import delete_pod, get_pod
from emulator.problems import ApiError
from emulator.routes_v2 import world_of
from emulator.world import CapacityFaults, Limits, World
from facts.pods import OWNER_ENV

router = APIRouter(prefix="/_admin")


class Advance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(ge=0)


class OutOfBand(BaseModel):
    """What happens to a pod behind the API's back: gone (host reclaimed), stopped, or failed."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["TERMINATED", "EXITED", "ERROR"] = "TERMINATED"


def counters_of(request: Request) -> Counters:
    counters: Counters = request.app.state.counters
    return counters


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    world = world_of(request)
    hosts = world.hosts.describe()
    return {
        "ok": True,
        "now": world.now(),
        "offerSpot": world.limits.offerSpot,
        "graphql": world.limits.graphql,
        "hosts": {k: hosts.get(k) for k in ("enabled", "mode", "reason", "bridge", "hostIp")},
    }


@router.get("/hosts")
async def hosts(request: Request) -> dict[str, Any]:
    """Emulated hosts: mode (hosts or control-plane only) and why, the bridge, each live host."""
    world = world_of(request)
    world.sync_hosts()
    return world.hosts.describe()


@router.post("/reset")
async def reset(request: Request) -> dict[str, Any]:
    world_of(request).reset()
    counters_of(request).clear()
    request.app.state.admission_buckets.clear()
    return {"ok": True}


@router.get("/faults")
async def get_faults(request: Request) -> FaultConfig:
    return world_of(request).faults.config


@router.put("/faults")
async def put_faults(request: Request, config: FaultConfig) -> FaultConfig:
    world = world_of(request)
    world.faults.set(config)
    world.audit("admin.faults", "account", None, None, **config.model_dump())
    return config


@router.get("/capacity")
async def get_capacity(request: Request) -> CapacityFaults:
    return world_of(request).capacity


@router.put("/capacity")
async def put_capacity(request: Request, config: CapacityFaults) -> CapacityFaults:
    world = world_of(request)
    world.capacity = config
    world.audit("admin.capacity", "account", None, None, **config.model_dump())
    return config


@router.get("/limits")
async def get_limits(request: Request) -> Limits:
    return world_of(request).limits


@router.patch("/limits")
async def patch_limits(request: Request, changes: dict[str, Any]) -> Limits:
    world = world_of(request)
    try:
        limits = Limits.model_validate(world.limits.model_dump() | changes)
    except ValueError as exc:
        raise ApiError(422, "limits do not validate", errors=[str(exc)]) from None
    world.set_limits(limits)
    return limits


@router.get("/clock")
async def get_clock(request: Request) -> dict[str, float]:
    return {"now": world_of(request).now()}


@router.post("/clock/advance")
async def advance(request: Request, body: Advance) -> dict[str, float]:
    world = world_of(request)
    now = world.clock.advance(body.seconds)
    world.tick()
    return {"now": now}


@router.post("/pods/{pod_id}/preempt")
async def preempt(request: Request, pod_id: str) -> dict[str, Any]:
    """Start a spot preemption: SIGTERM now, SIGKILL and EXITED after the notice (5 s by default)."""
    world = world_of(request)
    pod = get_pod(world, pod_id)
    if not pod.spot:
        raise ApiError(409, f"Pod {pod.id} is on-demand; only spot pods are preempted.")
    notice = world.timing.preempt_notice_s
    pod.preempt_at = world.now() + notice
    world.hosts.signal(pod.id, signal.SIGTERM)  # the container's processes get the notice
    world.save(pod)
    world.audit(
        "pod.preempt_notice",
        "pod",
        pod.id,
        pod.name,
        signal="SIGTERM",
        noticeSeconds=notice,
        exitAt=pod.preempt_at,
    )
    world.tick()
    return {"podId": pod.id, "exitAt": pod.preempt_at, "noticeSeconds": notice}


@router.post("/pods/{pod_id}/out-of-band")
async def out_of_band(request: Request, pod_id: str, body: OutOfBand) -> dict[str, Any]:
    """A pod or cluster node lost without any API call: the host died, or RunPod reclaimed it."""
    world = world_of(request)
    pod = get_pod(world, pod_id)
    if body.status == "TERMINATED":
        delete_pod(world, pod, event="pod.lost")
    else:
        pod.halted = body.status
        world.save(pod)
        world.audit("pod.halted_out_of_band", "pod", pod.id, pod.name, status=body.status)
    return {"podId": pod.id, "status": body.status}


@router.get("/audit")
async def audit(request: Request, since: int = 0, limit: int = 10_000) -> dict[str, Any]:
    return {"entries": world_of(request).store.audit_since(since, limit)}


@router.get("/counters")
async def counters(request: Request) -> dict[str, Any]:
    return counters_of(request).view()


@router.get("/counters/wait")
async def counters_wait(
    request: Request, total: int = Query(ge=0), timeoutS: float = Query(default=1.0, ge=0, le=60)
) -> dict[str, Any]:
    """Answer once `total` requests are counted, or after `timeoutS`: `reached` says which, with the view."""
    reached = await counters_of(request).reach(total, timeoutS)
    view = counters_of(request).view()
    return view | {"reached": reached, "total": counters_of(request).total}


def _live_pods(world: World) -> list[dict[str, Any]]:
    return [
        {
            "id": p.id,
            "name": p.name,
            "status": world.status(p),
            "cost": 0.0 if p.halted else p.hourly_cost,
            "clusterId": p.cluster_id,
            "spot": p.spot,
            # The ownership mark the pod carries (env TRAINSTACK_OWNER, `<project>/<stack>`): which stack made
            # it, read by the local account's lines (ops/local_account.py), never guessed from the name.
            "owner": p.env.get(OWNER_ENV),
        }
        for p in world.pods.values()
    ]


def _duplicates(named: dict[str, list[str]]) -> dict[str, list[str]]:
    return {kind: sorted(n for n, c in Counter(names).items() if c > 1) for kind, names in named.items()}


@router.get("/live")
async def live(request: Request) -> dict[str, Any]:
    """Everything still billed or stored, and names held by more than one live resource."""
    world = world_of(request)
    pods = _live_pods(world)
    clusters = [{"id": c.id, "name": c.name, "podIds": c.pod_ids} for c in world.clusters.values()]
    volumes = [
        {"id": v.id, "name": v.name, "dataCenterId": v.data_center_id, "size": v.size}
        for v in world.volumes.values()
    ]
    secrets = [{"id": s.id, "name": s.name, "valueVersion": s.value_version} for s in world.secrets.values()]
    named = {
        # Cluster members are named after their cluster, so a duplicate cluster already shows.
        "pod": [str(p["name"]) for p in pods if p["clusterId"] is None],
        "cluster": [c.name for c in world.clusters.values()],
        "volume": [v.name for v in world.volumes.values()],
        "secret": [s.name for s in world.secrets.values()],
    }
    return {
        "pods": pods,
        "clusters": clusters,
        "volumes": volumes,
        "secrets": secrets,
        "spendPerHour": world.live_spend(),
        "duplicates": _duplicates(named),
    }
