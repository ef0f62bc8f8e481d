"""Typed records of what we send to RunPod and what it returns (REST v2 and the GraphQL subset)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


# defer_build: a model's validator is built the first time it is used, not at import, so the Pulumi
# program (which imports these modules but never calls RunPod) does not pay for ~40 records.
class _Record(BaseModel):
    """A response record: unknown fields are ignored so RunPod can add fields without breaking us."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True, defer_build=True)


class _Request(BaseModel):
    """A request body: v2 create bodies reject unknown fields (422), so ours are closed too."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, defer_build=True)


# ---- requests -------------------------------------------------------------------------------------


class GpuRequest(_Request):
    id: str  # catalog GPU id, e.g. "NVIDIA H100 80GB HBM3"
    count: int
    min_cuda_version: str | None = Field(default=None, alias="minCudaVersion")


class NetworkMountRequest(_Request):
    volume_id: str = Field(alias="volumeId")
    path: str


class MountsRequest(_Request):
    network: list[NetworkMountRequest]


class PodCreate(_Request):
    """Body of `POST /v2/pods`."""

    name: str
    image: str
    gpu: GpuRequest
    cloud: str
    data_center_ids: list[str] | None = Field(default=None, alias="dataCenterIds")
    env: dict[str, str] | None = None
    ports: list[str] | None = None
    args: str | None = None
    disk: int | None = None
    mounts: MountsRequest | None = None
    global_networking: bool | None = Field(default=None, alias="globalNetworking")
    start_ssh: bool | None = Field(default=None, alias="startSsh")
    registry: str | None = None  # a container registry credential id (`runpod:RegistryAuth`)


class RegistryCreate(_Request):
    """Body of `POST /v2/registries`; username and password are write-only (never in a response)."""

    name: str
    username: str
    password: str


class PodPatch(_Request):
    """Body of `PATCH /v2/pods/{id}`; env replaces the whole env."""

    name: str | None = None
    image: str | None = None
    args: str | None = None
    env: dict[str, str] | None = None
    ports: list[str] | None = None
    disk: int | None = None
    mounts: MountsRequest | None = None
    global_networking: bool | None = Field(default=None, alias="globalNetworking")


class SpotPodRent(_Request):
    """`PodRentInterruptableInput` of the legacy GraphQL `podRentInterruptable` mutation."""

    name: str
    image_name: str = Field(alias="imageName")
    gpu_type_id: str = Field(alias="gpuTypeId")
    gpu_count: int = Field(alias="gpuCount")
    bid_per_gpu: float = Field(alias="bidPerGpu")
    cloud_type: str = Field(alias="cloudType")
    data_center_id: str | None = Field(default=None, alias="dataCenterId")
    container_disk_in_gb: int | None = Field(default=None, alias="containerDiskInGb")
    docker_args: str | None = Field(default=None, alias="dockerArgs")
    ports: str | None = None  # comma-separated, "22/tcp,8888/http"
    env: list[dict[str, str]] | None = None  # [{"key": ..., "value": ...}]
    network_volume_id: str | None = Field(default=None, alias="networkVolumeId")
    volume_mount_path: str | None = Field(default=None, alias="volumeMountPath")
    start_ssh: bool | None = Field(default=None, alias="startSsh")


class ClusterComputeRequest(_Request):
    gpu_type_id: str = Field(alias="gpuTypeId")
    gpu_count_per_pod: int = Field(alias="gpuCountPerPod")
    pod_count: int = Field(alias="podCount")


class ClusterCreate(_Request):
    """Body of `POST /v2/clusters`."""

    name: str
    type: str
    compute: ClusterComputeRequest
    image: str | None = None
    args: str | None = None
    disk: int | None = None
    env: dict[str, str] | None = None
    ports: list[str] | None = None
    data_center_ids: list[str] | None = Field(default=None, alias="dataCenterIds")
    mounts: MountsRequest | None = None
    start_ssh: bool | None = Field(default=None, alias="startSsh")


class VolumeCreate(_Request):
    """Body of `POST /v2/network-volumes`."""

    name: str
    size: int
    data_center: str = Field(alias="dataCenter")
    type: str | None = None


class VolumePatch(_Request):
    """Body of `PATCH /v2/network-volumes/{id}`: size may only grow."""

    name: str | None = None
    size: int | None = None


# ---- responses ------------------------------------------------------------------------------------


class RuntimePort(_Record):
    private: int | None = None  # port inside the container
    public: int | None = None  # port on `ip`; null until mapped
    type: str | None = None  # "tcp" or "http"
    ip: str | None = None  # public IP of the host, for tcp ports


class Runtime(_Record):
    uptime: int | None = None  # seconds since the container started
    ports: list[RuntimePort] = Field(default_factory=list)


class SshEndpoint(_Record):
    host: str
    port: int


class PodSsh(_Record):
    proxy: SshEndpoint | None = None  # RunPod's SSH proxy (shell only)
    direct: SshEndpoint | None = None  # the pod's published 22/tcp; null until mapped


class GlobalNetworking(_Record):
    enabled: bool = False
    ip: str | None = None  # private IP reachable across data centers
    internal_dns: str | None = Field(default=None, alias="internalDns")


class PodClusterInfo(_Record):
    id: str
    rank: int | None = None  # NODE_RANK; null until assigned
    ip: str | None = None  # address on the cluster fabric overlay


class PodGpu(_Record):
    id: str
    count: int = 1


class ApiPod(_Record):
    """A pod as `GET /v2/pods/{id}` returns it."""

    id: str
    name: str
    status: str  # PROVISIONING | STARTING | RUNNING | EXITED | ERROR | TERMINATED
    image: str | None = None
    args: str | None = None
    disk: int | None = None
    env: dict[str, str] = Field(default_factory=dict)
    ports: list[str] = Field(default_factory=list)
    cloud: str | None = None
    data_center_id: str | None = Field(default=None, alias="dataCenterId")
    gpu: PodGpu | None = None
    cost: float | None = None  # USD/h as billed now; 0 when stopped
    ssh: PodSsh | None = None
    runtime: Runtime | None = None
    global_networking: GlobalNetworking | None = Field(default=None, alias="globalNetworking")
    cluster: PodClusterInfo | None = None
    created_at: str | None = Field(default=None, alias="createdAt")  # ISO 8601: when billing began

    def ssh_endpoint(self) -> tuple[str, int] | None:
        """The directly reachable SSH endpoint: `ssh.direct`, else the runtime mapping of port 22."""
        if self.ssh is not None and self.ssh.direct is not None:
            return self.ssh.direct.host, self.ssh.direct.port
        for port in self.runtime.ports if self.runtime is not None else []:
            if port.private == 22 and port.public is not None and port.ip:
                return port.ip, port.public
        return None


class ClusterCompute(_Record):
    gpu_type_id: str = Field(alias="gpuTypeId")
    gpu_count_per_pod: int = Field(alias="gpuCountPerPod")
    pod_count: int = Field(alias="podCount")


class ClusterNetwork(_Record):
    cidr: str


class ClusterPrimary(_Record):
    pod_id: str = Field(alias="podId")
    status: str | None = None
    ssh_endpoint: str | None = Field(default=None, alias="sshEndpoint")  # "host:port"


class ApiCluster(_Record):
    """A cluster as `GET /v2/clusters/{id}` returns it."""

    id: str
    name: str
    type: str | None = None
    compute: ClusterCompute | None = None
    data_center_id: str | None = Field(default=None, alias="dataCenterId")
    network: ClusterNetwork | None = None
    primary: ClusterPrimary | None = None


class ApiVolume(_Record):
    """A network volume as `GET /v2/network-volumes/{id}` returns it."""

    id: str
    name: str
    size: int  # GB
    data_center: str = Field(alias="dataCenter")
    type: str | None = None  # STANDARD | HIGH_PERFORMANCE


class GpuPrice(_Record):
    secure: float | None = None  # USD per GPU-hour, on-demand secure cloud
    community: float | None = None


class ApiGpuType(_Record):
    """One `GET /v2/catalog/gpus` entry."""

    id: str
    price: GpuPrice = Field(default_factory=GpuPrice)


class ApiDataCenterStock(_Record):
    """One `dataCenters` entry of a GPU type read with `include=AVAILABILITY` (DataCenterAvailability)."""

    id: str = Field(min_length=1)
    availability: Literal["NONE", "LOW", "MEDIUM", "HIGH"]  # AvailabilityLevel: RunPod's coarse stock level


class ApiGpuStock(_Record):
    """`GET /v2/catalog/gpus/{id}?include=AVAILABILITY&product=...&count=...`: the GPU type's stock for
    `count` GPUs per machine, overall and per data center. `dataCenters` is "omitted entirely when the
    configuration is unavailable everywhere", so a missing list reads as none free anywhere."""

    id: str
    availability: Literal["NONE", "LOW", "MEDIUM", "HIGH"] | None = None
    data_centers: list[ApiDataCenterStock] = Field(default_factory=list, alias="dataCenters")


class ApiRegistry(_Record):
    """A container registry credential as `GET /v2/registries` lists it: id and name only."""

    id: str
    name: str


class ApiSecret(_Record):
    """A RunPod secret as the GraphQL lookup returns it: id, name and description, never the value."""

    id: str
    name: str
    description: str | None = None  # the stack writes its ownership mark here (ops/ownership.py)
    created_at: str | None = Field(default=None, alias="createdAt")  # ISO 8601 (scripts/reconcile: its age)
