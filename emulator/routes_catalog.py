"""REST v2 catalog routes: GPU types with prices and stock, data centers with their features."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request

from emulator.catalog import DataCenter, Gpu, cuda_key, data_center_view, gpu_view
from emulator.problems import ApiError
from emulator.routes_v2 import checked_query, world_of
from emulator.world import World

router = APIRouter(prefix="/v2/catalog", dependencies=[Depends(checked_query)])


def _free_by_dc(world: World, gpu: Gpu) -> dict[str, int]:
    return {
        dc.id: max(0, world.free_gpus(gpu.id, dc.id))
        for dc in world.catalog.dataCenters
        if gpu.id in dc.stock
    }


def _free_by_gpu(world: World, dc: DataCenter) -> dict[str, int]:
    return {g.id: max(0, world.free_gpus(g.id, dc.id)) for g in world.catalog.gpus if g.id in dc.stock}


# listGpuTypes parameters that are "valid only with include=AVAILABILITY (400 otherwise)".
_AVAILABILITY_ONLY = ("product", "count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion")


def check_gpu_query(query: dict[str, Any]) -> None:
    """The rules the listGpuTypes parameter descriptions state in text (each a 400)."""
    with_stock = "AVAILABILITY" in query.get("include", [])
    if with_stock and not query.get("product"):
        raise ApiError(400, "include=AVAILABILITY needs product (POD, CLUSTER or SERVERLESS): stock differs.")
    stray = [name for name in _AVAILABILITY_ONLY if name in query]
    if stray and not with_stock:
        raise ApiError(400, f"{', '.join(stray)} is valid only with include=AVAILABILITY.")
    if "cudaVersions" in query and "minCudaVersion" in query:
        raise ApiError(400, "cudaVersions and minCudaVersion are mutually exclusive; send one.")


def _cuda_wanted(query: dict[str, Any]) -> Callable[[str], bool]:
    """cudaVersions match exactly; minCudaVersion compares numerically and a bare major means any
    release of it ("12" accepts 12.0 and up), per the parameter descriptions."""
    exact = query.get("cudaVersions")
    floor = query.get("minCudaVersion")
    if exact:
        return lambda v: v in exact
    if floor:
        return lambda v: cuda_key(v) >= cuda_key(floor if "." in floor else f"{floor}.0")
    return lambda _v: True


def _gpu_matches(world: World, gpu: Gpu, query: dict[str, Any]) -> bool:
    cloud = query.get("cloud")
    ceiling = gpu.maxCount.community if cloud == "COMMUNITY" else gpu.maxCount.secure
    if query.get("count", 1) > ceiling:
        return False
    countries = query.get("countryCodes")
    if countries:
        return any(dc.countryCode in countries and gpu.id in dc.stock for dc in world.catalog.dataCenters)
    return True


def _dc_matches(dc: DataCenter, query: dict[str, Any]) -> bool:
    if query.get("regions") and dc.region not in query["regions"]:
        return False
    if query.get("networkVolumeTypes") and not set(query["networkVolumeTypes"]) & set(dc.networkVolumeTypes):
        return False
    if query.get("compliance") and not set(query["compliance"]) <= set(dc.compliance):
        return False
    return "globalNetwork" not in query or dc.globalNetwork == query["globalNetwork"]


def _gpu_response(world: World, gpu: Gpu, query: dict[str, Any]) -> dict[str, Any]:
    if "AVAILABILITY" not in query.get("include", []):
        return gpu_view(world.catalog, gpu, None)
    wanted = _cuda_wanted(query)
    countries = query.get("countryCodes")
    # Availability, the dataCenters array and cudaVersions are scoped by the same filters.
    scope = [
        dc
        for dc in world.catalog.dataCenters
        if gpu.id in dc.stock
        and (not countries or dc.countryCode in countries)
        and any(wanted(v) for v in dc.cudaVersions)
    ]
    # "Capacity exhausted for good" (the admin fault) is no stock anywhere, in the catalog as at create.
    free = {dc.id: 0 if world.capacity.exhausted else max(0, world.free_gpus(gpu.id, dc.id)) for dc in scope}
    return gpu_view(world.catalog, gpu, free, scope, wanted, query.get("count", 1))


@router.get("/gpus")
async def list_gpus(request: Request) -> dict[str, Any]:
    world, query = world_of(request), request.state.query
    check_gpu_query(query)
    return {
        "gpus": [_gpu_response(world, g, query) for g in world.catalog.gpus if _gpu_matches(world, g, query)]
    }


@router.get("/gpus/{gpu_id}")
async def get_gpu(request: Request, gpu_id: str) -> dict[str, Any]:
    world = world_of(request)
    gpu = world.catalog.gpu(gpu_id)
    if gpu is None:
        raise ApiError(404, f"GPU type {gpu_id!r} was not found.")
    check_gpu_query(request.state.query)
    return _gpu_response(world, gpu, request.state.query)


def _dc_response(world: World, dc: DataCenter, query: dict[str, Any]) -> dict[str, Any]:
    with_stock = "GPU_AVAILABILITY" in query.get("include", [])
    return data_center_view(world.catalog, dc, _free_by_gpu(world, dc) if with_stock else None)


@router.get("/datacenters")
async def list_data_centers(request: Request) -> dict[str, Any]:
    world, query = world_of(request), request.state.query
    found = [d for d in world.catalog.dataCenters if _dc_matches(d, query)]
    return {"dataCenters": [_dc_response(world, d, query) for d in found]}


@router.get("/datacenters/{dc_id}")
async def get_data_center(request: Request, dc_id: str) -> dict[str, Any]:
    world = world_of(request)
    dc = world.catalog.data_center(dc_id)
    if dc is None:
        raise ApiError(404, f"Data center {dc_id!r} was not found.")
    return _dc_response(world, dc, request.state.query)
