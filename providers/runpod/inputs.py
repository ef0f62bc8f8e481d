"""Typed inputs of the RunPod resources, as components build them (checked by mypy, not at run time).

Each field is a property of docs/ARCHITECTURE.md's resource contract; `None` leaves it to the provider's
default (providers/runpod/models.py validates the values in `check()` and holds every default). Kept free of
pydantic and httpx so the Pulumi program can import it at no cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

import pulumi

from providers.resource import ResourceInputs

Cloud = Literal["SECURE", "COMMUNITY"]
Capacity = Literal["on_demand", "spot", "auto"]


@dataclass(frozen=True, kw_only=True)
class TrainingInputs(ResourceInputs):
    """Metadata for policies and node scripts; changing it never touches the RunPod resource."""

    checkpoint_bucket: str | None = None
    checkpoint_interval_s: int | None = None
    max_run_hours: float | None = None


@dataclass(frozen=True, kw_only=True)
class ContainerInputs(ResourceInputs):
    """What pods and Instant Clusters share."""

    name: str
    image: str
    gpu_type_id: str  # RunPod catalog id, e.g. "NVIDIA H100 80GB HBM3" (facts.gpus)
    env: Mapping[str, pulumi.Input[str]] | None = None
    ports: Sequence[str] | None = None  # "22/tcp"; readiness waits for 22
    args: str | None = None
    container_disk_gb: int | None = None
    volume_id: pulumi.Input[str] | None = None  # a NetworkVolume's id, in the same data center
    volume_mount_path: str | None = None
    start_ssh: bool | None = None
    training: TrainingInputs | None = None
    ready_timeout_s: float | None = None


class ContainerFields(TypedDict, total=False):
    """`ContainerInputs`' fields but `name`, as keyword arguments mypy checks (`PodInputs(**shared, ...)`)."""

    image: str
    gpu_type_id: str
    env: Mapping[str, pulumi.Input[str]] | None
    ports: Sequence[str] | None
    args: str | None
    container_disk_gb: int | None
    volume_id: pulumi.Input[str] | None
    volume_mount_path: str | None
    start_ssh: bool | None
    training: TrainingInputs | None
    ready_timeout_s: float | None


@dataclass(frozen=True, kw_only=True)
class PodInputs(ContainerInputs):
    """Inputs of `runpod:Pod`."""

    gpu_count: int | None = None
    cloud: Cloud | None = None
    data_center_ids: Sequence[pulumi.Input[str]] | None = None  # preference order; empty = any
    capacity: Capacity | None = None
    bid_per_gpu: float | None = None  # USD per GPU-hour, spot/auto only
    global_networking: bool | None = None
    min_cuda_version: str | None = None
    registry_id: pulumi.Input[str] | None = None  # from `runpod:RegistryAuth`, for a private image
    desired_status: Literal["RUNNING", "EXITED"] | None = None  # EXITED: stopped, bills only its volume disk


@dataclass(frozen=True, kw_only=True)
class RegistryAuthInputs(ResourceInputs):
    """Inputs of `runpod:RegistryAuth`; `password` is always sent as a Pulumi secret."""

    name: str
    username: str
    password: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class InstantClusterInputs(ContainerInputs):
    """Inputs of `runpod:InstantCluster`: `name`, `training` and `ready_timeout_s` change in place (a rename,
    or metadata only); every other field forces a replacement."""

    pod_count: int
    cluster_type: Literal["TRAINING", "APPLICATION", "SLURM", "RAY"] | None = None
    gpu_count_per_pod: int | None = None
    data_center_id: pulumi.Input[str] | None = None  # pinned (by its volume's data center)
    data_center_ids: Sequence[str] | None = None  # candidates, in order; create falls back along them


@dataclass(frozen=True, kw_only=True)
class NetworkVolumeInputs(ResourceInputs):
    """Inputs of `runpod:NetworkVolume`: size may only grow; data center and type replace."""

    name: str
    size_gb: int
    data_center_id: str | None = None  # None: chosen by `placement` at check, then kept in the state
    volume_type: Literal["STANDARD", "HIGH_PERFORMANCE"] | None = None
    placement: PlacementInputs | None = None


@dataclass(frozen=True, kw_only=True)
class PlacementInputs(ResourceInputs):
    """Candidates (in order) and the compute a volume is for; see `PlacementSpec`."""

    candidates: Sequence[str]
    gpu_type_id: str
    gpu_count: int
    product: Literal["POD", "CLUSTER"]
    cloud: Literal["SECURE", "COMMUNITY"] | None = None


@dataclass(frozen=True, kw_only=True)
class SecretInputs(ResourceInputs):
    """Inputs of `runpod:Secret`; `value` is always sent as a Pulumi secret."""

    name: str
    value: pulumi.Input[str]
    description: str | None = None
