"""Validated inputs of the RunPod resources (the property names of docs/ARCHITECTURE.md).

`check()` validates a resource's raw Pulumi inputs against these models; each pydantic error becomes a
`CheckFailure` naming the field. Numbers arrive from Pulumi as floats (`3` -> `3.0`); pydantic's lax mode
turns integral floats back into ints. Defaults are written here and nowhere else.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from facts import secrets
from providers.common import InputModel

Cloud = Literal["SECURE", "COMMUNITY"]
Capacity = Literal["on_demand", "spot", "auto"]

_PORT = re.compile(r"^\d{1,5}/(tcp|http)$")
_CUDA = re.compile(r"^\d+\.\d+$")


class _Spec(InputModel):
    """Base of the RunPod input models: `<Kind>Spec` is what a provider validates and reads (the callers
    build the matching `<Resource>Inputs` of inputs.py, which the engine turns into these properties)."""


class TrainingSpec(_Spec):
    """Metadata for policies and node scripts; changing it never touches the RunPod resource."""

    checkpoint_bucket: str | None = None  # S3 bucket the job writes checkpoints to
    checkpoint_interval_s: int | None = Field(default=None, gt=0)  # timer-based checkpoints (spot)
    max_run_hours: float | None = Field(default=None, gt=0)  # budget guard read by policies


class _ContainerSpec(_Spec):
    name: str = Field(min_length=1, max_length=191)
    image: str = Field(min_length=1)
    gpu_type_id: str = Field(min_length=1)  # catalog id, e.g. "NVIDIA H100 80GB HBM3"
    env: dict[str, str] = Field(default_factory=dict)
    ports: list[str] = Field(default_factory=lambda: ["22/tcp"])
    args: str | None = None  # one string passed to the entrypoint
    container_disk_gb: int = Field(default=50, ge=1, le=2000)
    volume_id: str | None = None  # a NetworkVolume id in the same data center
    volume_mount_path: str = "/workspace"
    start_ssh: bool = True
    training: TrainingSpec | None = None
    ready_timeout_s: float | None = Field(default=None, gt=0)  # default: env or 20 min

    @field_validator("ports")
    @classmethod
    def _ports(cls, ports: list[str]) -> list[str]:
        bad = [p for p in ports if not _PORT.match(p)]
        if bad:
            raise ValueError(f"ports must look like '22/tcp' or '8888/http'; fix {bad}")
        return ports

    def rule_failures(self) -> list[tuple[str, str]]:
        out = super().rule_failures()
        if "22/tcp" not in self.ports:
            out.append(("ports", "add '22/tcp': readiness waits for the SSH port to be mapped"))
        return out

    @field_validator("volume_mount_path")
    @classmethod
    def _mount(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError("volume_mount_path must be an absolute path such as /workspace")
        return path


class PodSpec(_ContainerSpec):
    """Inputs of `runpod:Pod`."""

    gpu_count: int = Field(default=1, ge=1, le=8)
    cloud: Cloud = "SECURE"
    data_center_ids: list[str] = Field(default_factory=list)  # preference order; empty = any
    capacity: Capacity = "on_demand"
    bid_per_gpu: float | None = Field(default=None, gt=0)  # USD per GPU-hour, spot/auto only
    global_networking: bool = False
    min_cuda_version: str | None = None  # "12.4": avoid hosts whose driver is too old
    registry_id: str | None = None  # `runpod:RegistryAuth` credential for a private image
    # RUNNING, or EXITED: stopped by an update (POST /v2/pods/{id}/action stop), the GPUs released and only
    # the volume disk billed; back to RUNNING starts the same pod (trainstack:supervisor.release_mode stop).
    desired_status: Literal["RUNNING", "EXITED"] = "RUNNING"

    @field_validator("min_cuda_version")
    @classmethod
    def _cuda(cls, value: str | None) -> str | None:
        if value is not None and not _CUDA.match(value):
            raise ValueError("min_cuda_version must be major.minor, e.g. '12.4'")
        return value

    def rule_failures(self) -> list[tuple[str, str]]:
        out = super().rule_failures()
        if self.capacity != "on_demand" and self.bid_per_gpu is None:
            out.append(("bid_per_gpu", "required when capacity is 'spot' or 'auto' (USD per GPU-hour)"))
        if self.registry_id and self.capacity != "on_demand":
            out.append(
                (
                    "registry_id",
                    "private registries need capacity 'on_demand': the legacy spot mutation takes no "
                    "registry credential; use on-demand or a public image",
                )
            )
        if self.desired_status == "EXITED" and self.capacity != "on_demand":
            out.append(
                (
                    "desired_status",
                    "only on-demand pods can be stopped and started again through REST v2; a spot pod "
                    "resumes only through the retiring GraphQL podBidResume: delete it instead",
                )
            )
        if self.volume_id and self.cloud != "SECURE":
            out.append(
                ("cloud", "network volumes are Secure Cloud only: set cloud to 'SECURE' or drop volume_id")
            )
        return out


class ClusterSpec(_ContainerSpec):
    """Inputs of `runpod:InstantCluster`: `name`, `training` and `ready_timeout_s` change in place (a rename,
    or metadata only); every other field forces a replacement."""

    cluster_type: Literal["TRAINING", "APPLICATION", "SLURM", "RAY"] = "TRAINING"
    gpu_count_per_pod: int = Field(default=8, ge=1, le=8)
    pod_count: int = Field(ge=2, le=8)  # self-serve H100 Instant Clusters: 2-8 nodes
    data_center_id: str | None = None  # one data center; the volume must live there too
    # Candidates in preference order: create tries each in turn while RunPod answers "no instances
    # available" (only when data_center_id is None; with it set they are only reported in `capacity`).
    data_center_ids: list[str] = Field(default_factory=list)


class PlacementSpec(_Spec):
    """How a volume picks its data center when the stack lists several: the first candidate whose stock
    for the compute that will mount it is not NONE (providers/runpod/capacity.py)."""

    candidates: list[str] = Field(min_length=1)  # trainstack:cluster.data_centers, in order
    gpu_type_id: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, le=8)  # GPUs per pod (per node of a cluster)
    product: Literal["POD", "CLUSTER"]
    cloud: Cloud = "SECURE"


class VolumeSpec(_Spec):
    """Inputs of `runpod:NetworkVolume`: size may only grow; data center and type replace. With `placement`
    and no `data_center_id`, check() fills `data_center_id` in (kept once chosen: it is in the state)."""

    name: str = Field(min_length=1)
    size_gb: int = Field(ge=10, le=4096)
    data_center_id: str = Field(min_length=1)
    volume_type: Literal["STANDARD", "HIGH_PERFORMANCE"] = "STANDARD"
    placement: PlacementSpec | None = None


class RegistryAuthSpec(_Spec):
    """Inputs of `runpod:RegistryAuth`: `password` is a Pulumi secret and is never written to outputs."""

    name: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)


class SecretSpec(_Spec):
    """Inputs of `runpod:Secret`: `value` is a Pulumi secret and is never written to outputs."""

    name: str
    value: str = Field(min_length=1)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not secrets.NAME_PATTERN.match(name):
            raise ValueError(secrets.NAME_RULE)
        return name
