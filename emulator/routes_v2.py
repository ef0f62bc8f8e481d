"""REST v2 routes: pods, clusters, network volumes, catalog and account ssh keys."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from emulator import clusters, pods, volumes
from emulator.jsonbody import parse_json
from emulator.spec import Spec
from emulator.views import cluster_view, pod_view, volume_view
from emulator.world import World


def world_of(request: Request) -> World:
    world: World = request.app.state.world
    return world


async def checked_query(request: Request) -> None:
    """Validate documented query parameters of whichever operation matched; 422 if they break it."""
    spec: Spec = request.app.state.spec
    op = spec.match(request.method, request.url.path)
    request.state.query = spec.check_query(op, dict(request.query_params)) if op else {}


router = APIRouter(prefix="/v2", dependencies=[Depends(checked_query)])


async def body_of(request: Request, schema: str) -> dict[str, Any]:
    value = parse_json(await request.body())
    spec: Spec = request.app.state.spec
    return spec.check_body(schema, value)


def no_content() -> Response:
    return Response(status_code=204)


# -- pods ------------------------------------------------------------------------------------------


@router.get("/pods")
async def list_pods(request: Request) -> dict[str, Any]:
    world = world_of(request)
    include = request.state.query.get("includeClusterPods", False)
    found = [p for p in world.pods.values() if include or p.cluster_id is None]
    return {"pods": [pod_view(world, p) for p in found]}


@router.post("/pods", status_code=201)
async def create_pod(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return pod_view(world, pods.create_pod(world, await body_of(request, "CreatePodRequest")))


@router.get("/pods/{pod_id}")
async def get_pod(request: Request, pod_id: str) -> dict[str, Any]:
    world = world_of(request)
    return pod_view(world, pods.get_pod(world, pod_id))


@router.patch("/pods/{pod_id}")
async def patch_pod(request: Request, pod_id: str) -> dict[str, Any]:
    world = world_of(request)
    pod = pods.get_pod(world, pod_id)
    return pod_view(world, pods.patch_pod(world, pod, await body_of(request, "UpdatePodRequest")))


@router.delete("/pods/{pod_id}", status_code=204)
async def delete_pod(request: Request, pod_id: str) -> Response:
    world = world_of(request)
    pod = pods.get_pod(world, pod_id)
    pods.refuse_member(pod, "terminated")
    pods.delete_pod(world, pod)
    return no_content()


@router.post("/pods/{pod_id}/action", response_model=None)
async def pod_action(request: Request, pod_id: str) -> dict[str, Any] | Response:
    world = world_of(request)
    pod = pods.get_pod(world, pod_id)
    action = (await body_of(request, "PodActionRequest"))["action"]
    result = pods.act(world, pod, action)
    return no_content() if result is None else pod_view(world, result)


# -- clusters --------------------------------------------------------------------------------------


@router.get("/clusters")
async def list_clusters(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return {"clusters": [cluster_view(world, c) for c in world.clusters.values()]}


@router.post("/clusters", status_code=201)
async def create_cluster(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return cluster_view(world, clusters.create_cluster(world, await body_of(request, "CreateClusterRequest")))


@router.get("/clusters/{cluster_id}")
async def get_cluster(request: Request, cluster_id: str) -> dict[str, Any]:
    world = world_of(request)
    return cluster_view(world, clusters.get_cluster(world, cluster_id))


@router.patch("/clusters/{cluster_id}")
async def patch_cluster(request: Request, cluster_id: str) -> dict[str, Any]:
    world = world_of(request)
    cluster = clusters.get_cluster(world, cluster_id)
    body = await body_of(request, "UpdateClusterRequest")
    return cluster_view(world, clusters.rename_cluster(world, cluster, body["name"]))


@router.delete("/clusters/{cluster_id}", status_code=204)
async def delete_cluster(request: Request, cluster_id: str) -> Response:
    world = world_of(request)
    clusters.delete_cluster(world, clusters.get_cluster(world, cluster_id))
    return no_content()


@router.get("/clusters/{cluster_id}/pods")
async def cluster_pods(request: Request, cluster_id: str) -> dict[str, Any]:
    world = world_of(request)
    members = clusters.member_pods(world, clusters.get_cluster(world, cluster_id))
    return {"pods": [pod_view(world, p) for p in members]}


# -- network volumes -------------------------------------------------------------------------------


@router.get("/network-volumes")
async def list_volumes(request: Request) -> dict[str, Any]:
    return {"networkVolumes": [volume_view(v) for v in world_of(request).volumes.values()]}


@router.post("/network-volumes", status_code=201)
async def create_volume(request: Request) -> dict[str, Any]:
    world = world_of(request)
    return volume_view(volumes.create_volume(world, await body_of(request, "CreateNetworkVolumeRequest")))


@router.get("/network-volumes/{volume_id}")
async def get_volume(request: Request, volume_id: str) -> dict[str, Any]:
    return volume_view(volumes.get_volume(world_of(request), volume_id))


@router.patch("/network-volumes/{volume_id}")
async def patch_volume(request: Request, volume_id: str) -> dict[str, Any]:
    world = world_of(request)
    volume = volumes.get_volume(world, volume_id)
    body = await body_of(request, "UpdateNetworkVolumeRequest")
    return volume_view(volumes.patch_volume(world, volume, body))


@router.delete("/network-volumes/{volume_id}", status_code=204)
async def delete_volume(request: Request, volume_id: str) -> Response:
    world = world_of(request)
    volumes.delete_volume(world, volumes.get_volume(world, volume_id))
    return no_content()


# -- account ---------------------------------------------------------------------------------------


@router.get("/account/ssh-keys")
async def get_ssh_keys(request: Request) -> dict[str, Any]:
    return {"keys": world_of(request).ssh_keys}


@router.put("/account/ssh-keys")
async def put_ssh_keys(request: Request) -> JSONResponse:
    world = world_of(request)
    world.ssh_keys = (await body_of(request, "UpdateSshKeysRequest"))["keys"]
    world.store.set_setting("ssh_keys", world.ssh_keys)
    world.audit("account.ssh_keys", "account", None, None, count=len(world.ssh_keys))
    return JSONResponse({"keys": world.ssh_keys})
