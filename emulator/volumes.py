"""Network volume rules: one data center each, size only grows, no delete while attached."""

from __future__ import annotations

from typing import Any

from emulator.models import VolumeRecord
from emulator.problems import ApiError
from emulator.world import World, new_id


def create_volume(world: World, body: dict[str, Any]) -> VolumeRecord:
    dc = world.catalog.data_center(body["dataCenter"])
    if dc is None:
        raise ApiError(400, f"Unknown data center {body['dataCenter']!r}. See GET /v2/catalog/datacenters.")
    kind = body.get("type", "STANDARD")
    if kind not in dc.networkVolumeTypes:
        raise ApiError(400, f"{dc.id} offers network volume types {dc.networkVolumeTypes}, not {kind}.")
    volume = VolumeRecord(
        id=new_id(),
        name=body["name"],
        size=body["size"],
        data_center_id=dc.id,
        type=kind,
        created_at=world.now(),
    )
    world.save(volume)
    world.audit("volume.create", "volume", volume.id, volume.name, size=volume.size, dataCenterId=dc.id)
    return volume


def get_volume(world: World, volume_id: str) -> VolumeRecord:
    volume = world.volumes.get(volume_id)
    if volume is None:
        raise ApiError(404, f"Network volume {volume_id!r} was not found.")
    return volume


def patch_volume(world: World, volume: VolumeRecord, body: dict[str, Any]) -> VolumeRecord:
    if "size" in body and body["size"] < volume.size:
        raise ApiError(
            400, f"A network volume can only grow: it is {volume.size} GB, asked for {body['size']} GB."
        )
    volume.size = body.get("size", volume.size)
    volume.name = body.get("name", volume.name)
    world.save(volume)
    world.audit("volume.update", "volume", volume.id, volume.name, fields=sorted(body), size=volume.size)
    return volume


def delete_volume(world: World, volume: VolumeRecord) -> None:
    users = sorted(p.id for p in world.pods.values() if p.volume_id == volume.id)
    if users:
        raise ApiError(
            400, f"Network volume {volume.id} is attached to pod(s) {', '.join(users)}; remove them first."
        )
    world.forget(volume)
    world.audit("volume.delete", "volume", volume.id, volume.name)
