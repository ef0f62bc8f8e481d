"""Render stored records as the v2 response shapes (`Pod`, `Cluster`, `NetworkVolume`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from emulator.models import ClusterRecord, PodRecord, VolumeRecord, injected_env
from emulator.world import World

# Which actions each status allows, as the spec's podAction description lists them.
ACTIONS: dict[str, list[str]] = {
    "RUNNING": ["stop", "restart", "terminate"],
    "EXITED": ["start", "terminate"],
    "ERROR": ["start", "terminate"],
    "PROVISIONING": ["stop", "terminate"],
    "STARTING": ["stop", "terminate"],
}
SSH_PROXY_HOST = "ssh.runpod.io"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _runtime(world: World, pod: PodRecord) -> dict[str, Any] | None:
    if not world.runtime_ready(pod):
        return None
    host = world.hosts.endpoint(pod.id)  # with emulated hosts, ports are the host's own, unmapped
    ports = []
    for index, spec in enumerate(pod.ports):
        port, _, kind = spec.partition("/")
        tcp = kind == "tcp"
        public = (int(port) if host else pod.port_base + index) if tcp else None
        ip = (host[0] if host else pod.public_ip) if tcp else None
        ports.append({"private": int(port), "public": public, "type": kind, "ip": ip})
    uptime = int(world.now() - world.running_since(pod))
    return {"uptime": uptime, "ports": ports, "gpus": [{"util": 0, "memoryUtil": 0}] * pod.gpu_count}


def _ssh(world: World, pod: PodRecord) -> dict[str, Any]:
    user = f"{pod.id}-{pod.port_base:08x}"
    proxy = {"host": SSH_PROXY_HOST, "port": 22, "username": user, "command": f"ssh {user}@{SSH_PROXY_HOST}"}
    direct = None
    address = world.ssh_address(pod)
    if address is not None:
        ip, port = address
        command = f"ssh root@{ip} -p {port}"
        direct = {"host": ip, "port": port, "username": "root", "command": command}
    return {"proxy": proxy, "direct": direct}


def _mounts(pod: PodRecord) -> dict[str, Any]:
    mounts: dict[str, Any] = {}
    if pod.persistent:
        mounts["persistent"] = dict(pod.persistent)
    if pod.volume_id:
        mounts["network"] = [{"volumeId": pod.volume_id, "path": pod.volume_path or "/workspace"}]
    return mounts


def pod_view(world: World, pod: PodRecord) -> dict[str, Any]:
    status = world.status(pod)
    gn: dict[str, Any] = {"enabled": pod.global_networking}
    if pod.global_networking and pod.gn_ip:
        gn |= {"ip": pod.gn_ip, "internalDns": f"{pod.id}.runpod.internal"}
    view: dict[str, Any] = {
        "id": pod.id,
        "name": pod.name,
        "image": pod.image,
        "args": pod.args,
        "disk": pod.disk,
        "ports": list(pod.ports),
        "env": {**pod.env, **injected_env(pod)},
        "registry": pod.registry,
        "status": status,
        "actions": ACTIONS.get(status, []),
        "mounts": _mounts(pod),
        "gpu": {"id": pod.gpu_id, "count": pod.gpu_count},
        "cloud": pod.cloud,
        "dataCenterId": pod.data_center_id,
        "cudaVersion": pod.cuda_version,
        "ssh": _ssh(world, pod),
        "template": None,
        "cost": 0.0 if pod.halted else pod.hourly_cost,
        "locked": pod.locked,
        "globalNetworking": gn,
        "runtime": _runtime(world, pod),
        "createdAt": iso(pod.created_at),
        "startedAt": iso(world.running_since(pod)) if status == "RUNNING" else None,
    }
    if pod.cluster_id is not None:
        view["cluster"] = {"id": pod.cluster_id, "rank": pod.rank, "ip": pod.fabric_ip}
    return view


def cluster_view(world: World, cluster: ClusterRecord) -> dict[str, Any]:
    members = [world.pods[i] for i in cluster.pod_ids if i in world.pods]
    by_status: dict[str, int] = {}
    for pod in members:
        status = world.status(pod)
        by_status[status] = by_status.get(status, 0) + 1
    view: dict[str, Any] = {
        "id": cluster.id,
        "name": cluster.name,
        "type": cluster.type,
        "compute": {
            "gpuTypeId": cluster.gpu_id,
            "gpuCountPerPod": cluster.gpu_count_per_pod,
            "podCount": cluster.pod_count,
        },
        "dataCenterId": cluster.data_center_id,
        "pods": {"total": len(members), "byStatus": by_status},
        "network": {"cidr": cluster.cidr, "vxlanId": cluster.vxlan_id, "vxlanPort": cluster.vxlan_port},
        "createdAt": iso(cluster.created_at),
    }
    primary = next((p for p in members if p.rank == 0), None)
    if primary is not None:
        view["primary"] = {"podId": primary.id, "status": world.status(primary)}
        address = world.ssh_address(primary)
        if address is not None:
            view["primary"]["sshEndpoint"] = f"{address[0]}:{address[1]}"
    return view


def volume_view(volume: VolumeRecord) -> dict[str, Any]:
    return {
        "id": volume.id,
        "name": volume.name,
        "size": volume.size,
        "dataCenter": volume.data_center_id,
        "type": volume.type,
    }
