"""Stored records of the emulated account: pods, clusters, network volumes, secrets."""

from __future__ import annotations

from pydantic import BaseModel, Field

from facts.pods import PodStatus

HALTED = tuple(s.value for s in PodStatus if s.is_halted)  # stopped but still on the account


class PodRecord(BaseModel):
    """A pod as the emulator remembers it; its status is derived from `boot_at` and the clock."""

    id: str
    name: str
    image: str
    args: str = ""
    disk: int = 50  # container disk, GB
    ports: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(
        default_factory=dict
    )  # the user's env; RunPod's injected env is added on render
    registry: str | None = None
    cloud: str = "SECURE"
    gpu_id: str
    gpu_count: int
    data_center_id: str
    cuda_version: str | None = None  # what the host machine reports; kept while stopped (same host)
    persistent: dict[str, int | str] | None = None  # {"size", "path"}
    volume_id: str | None = None
    volume_path: str | None = None
    global_networking: bool = False
    # PATCH of globalNetworking applies at the next start or restart (RunPod docs).
    global_networking_next: bool | None = None
    gn_ip: str | None = None
    locked: bool = False
    start_ssh: bool = False
    cost_per_gpu: float  # USD per GPU-hour, fixed when the pod was placed
    created_at: float
    boot_at: float  # when the current start began (PROVISIONING)
    halted: str | None = None  # "EXITED" or "ERROR" once stopped; None while on the way to RUNNING
    public_ip: str
    port_base: int  # public ports are port_base + index of the port in `ports`
    spot: bool = False
    bid_per_gpu: float | None = None
    preempt_at: float | None = None
    cluster_id: str | None = None
    rank: int | None = None
    fabric_ip: str | None = None
    cluster_env: dict[str, str] = Field(default_factory=dict)

    @property
    def hourly_cost(self) -> float:
        return round(self.cost_per_gpu * self.gpu_count, 4)


class ClusterRecord(BaseModel):
    """An Instant Cluster; its members are pods with `cluster_id` set, `pod_ids` in rank order."""

    id: str
    name: str
    type: str
    gpu_id: str
    gpu_count_per_pod: int
    pod_count: int
    data_center_id: str
    cidr: str
    vxlan_id: int
    vxlan_port: int = 4789
    created_at: float
    pod_ids: list[str] = Field(default_factory=list)


class VolumeRecord(BaseModel):
    """A network volume; it lives in exactly one data center."""

    id: str
    name: str
    size: int
    data_center_id: str
    type: str = "STANDARD"
    created_at: float


class SecretRecord(BaseModel):
    """A console secret. The value is never stored: only a counter of how often it was set."""

    id: str
    name: str
    description: str | None = None
    value_version: int = 1
    created_at: float
    updated_at: float | None = None


class RegistryRecord(BaseModel):
    """A container registry credential. Username and password are write-only in the spec and are not kept
    at all here: nothing pulls images, so nothing needs them."""

    id: str
    name: str
    created_at: float


def public_port(pod: PodRecord, private: int) -> int | None:
    """The public port RunPod maps to `private` (tcp), or None when the pod does not expose it."""
    for index, spec in enumerate(pod.ports):
        port, _, kind = spec.partition("/")
        if kind == "tcp" and int(port) == private:
            return pod.port_base + index
    return None


def injected_env(pod: PodRecord) -> dict[str, str]:
    """What RunPod adds to every container (docs.runpod.io/pods/templates/environment-variables); cluster
    members get more."""
    env = {"RUNPOD_POD_ID": pod.id, "RUNPOD_DC_ID": pod.data_center_id, "RUNPOD_PUBLIC_IP": pod.public_ip}
    ssh_port = public_port(pod, 22)
    if ssh_port is not None:
        env["RUNPOD_TCP_PORT_22"] = str(ssh_port)
    return {**env, **pod.cluster_env}
