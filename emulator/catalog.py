"""The dated price and stock snapshot, and the v2 catalog views built from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

CATALOG_FILE = Path(__file__).parent / "data" / "catalog-2026-11-09.json"


class Prices(BaseModel):
    model_config = ConfigDict(frozen=True)

    secure: float
    community: float


class MaxCount(BaseModel):
    model_config = ConfigDict(frozen=True)

    secure: int
    community: int


class Gpu(BaseModel):
    """One GPU type; `id` is RunPod's long name, the one `gpu.id` carries."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    pool: str
    manufacturer: str
    memory: int
    price: Prices  # USD per GPU-hour
    maxCount: MaxCount
    spotMinBid: float


class DataCenter(BaseModel):
    """One location; `stock` is free GPUs per GPU type before any pod is placed."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    region: str
    countryCode: str
    globalNetwork: bool
    networkVolumeTypes: list[str]
    compliance: list[str]
    stock: dict[str, int]
    # CUDA versions its machines report (`major.minor`); placement honours a pod's CUDA constraint.
    cudaVersions: list[str]


def cuda_key(version: str) -> tuple[int, ...]:
    """`major.minor` compared numerically, as the spec says: 12.11 is above 12.2."""
    return tuple(int(part) for part in version.split("."))


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    snapshotDate: str
    cudaVersions: list[str]
    gpus: list[Gpu]
    dataCenters: list[DataCenter]

    @classmethod
    def load(cls, path: Path = CATALOG_FILE) -> Catalog:
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))

    def gpu(self, gpu_id: str) -> Gpu | None:
        return next((g for g in self.gpus if g.id == gpu_id), None)

    def data_center(self, dc_id: str) -> DataCenter | None:
        return next((d for d in self.dataCenters if d.id == dc_id), None)

    def price(self, gpu_id: str, cloud: str) -> float:
        gpu = self.gpu(gpu_id)
        if gpu is None:
            return 0.0
        return gpu.price.secure if cloud == "SECURE" else gpu.price.community


def availability_level(free: int) -> str:
    """RunPod publishes stock as a coarse level; these thresholds are ours."""
    if free <= 0:
        return "NONE"
    return "LOW" if free < 8 else ("MEDIUM" if free < 32 else "HIGH")


def gpu_view(
    catalog: Catalog,
    gpu: Gpu,
    free: dict[str, int] | None,
    scope: list[DataCenter] | None = None,
    wanted: Callable[[str], bool] = lambda _v: True,
    count: int = 1,
) -> dict[str, Any]:
    """A `GpuType`; `free` (per data center in `scope`) adds the availability fields for `count` GPUs."""
    view: dict[str, Any] = {
        "id": gpu.id,
        "name": gpu.name,
        "pool": gpu.pool,
        "manufacturer": gpu.manufacturer,
        "memory": gpu.memory,
        "secure": True,
        "community": True,
        "price": gpu.price.model_dump(),
        "maxCount": gpu.maxCount.model_dump(),
    }
    if free is None:
        return view
    dcs = scope if scope is not None else [dc for dc in catalog.dataCenters if gpu.id in dc.stock]
    fits = {dc.id: free.get(dc.id, 0) if free.get(dc.id, 0) >= count else 0 for dc in dcs}
    view["availability"] = availability_level(sum(fits.values()))
    if dcs:  # "omitted entirely when the configuration is unavailable everywhere"
        view["dataCenters"] = [
            {"id": dc.id, "name": dc.name, "availability": availability_level(fits[dc.id])} for dc in dcs
        ]
    versions = sorted({v for dc in dcs for v in dc.cudaVersions if wanted(v)}, key=cuda_key)
    if versions:  # absent for a GPU type with none; a missing list reads as an empty one
        view["cudaVersions"] = [
            {"version": v, "available": any(fits[dc.id] > 0 for dc in dcs if v in dc.cudaVersions)}
            for v in versions
        ]
    return view


def data_center_view(catalog: Catalog, dc: DataCenter, free: dict[str, int] | None) -> dict[str, Any]:
    """A `DataCenter`; `free` (per GPU type) adds `gpuAvailability`."""
    view: dict[str, Any] = {
        "id": dc.id,
        "name": dc.name,
        "region": dc.region,
        "globalNetwork": dc.globalNetwork,
        "networkVolumeTypes": list(dc.networkVolumeTypes),
        "compliance": list(dc.compliance),
    }
    if free is not None:
        view["gpuAvailability"] = [
            {"id": g.id, "name": g.name, "availability": availability_level(free.get(g.id, 0))}
            for g in catalog.gpus
            if g.id in dc.stock
        ]
    return view
