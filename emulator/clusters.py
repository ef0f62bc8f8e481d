"""Instant Cluster rules: one data center, ranked members, fabric IPs and RunPod's injected env."""

from __future__ import annotations

from typing import Any

from emulator.models import ClusterRecord, PodRecord
from emulator.pods import check_image, check_ports, delete_pod, new_pod, volume_placement
from emulator.problems import ApiError
from emulator.world import World, new_id

# torch.distributed's defaults; RunPod publishes the port in PRIMARY_PORT/MASTER_PORT.
PRIMARY_PORT = 29500
RENDEZVOUS_PORT = 29400


def node_env(primary_ip: str, node_ip: str, rank: int, nodes: int, gpus_per_node: int) -> dict[str, str]:
    """The variables RunPod injects on every cluster node (docs.runpod.io/instant-clusters/configuration)."""
    return {
        "PRIMARY_ADDR": primary_ip,
        "MASTER_ADDR": primary_ip,
        "PRIMARY_PORT": str(PRIMARY_PORT),
        "MASTER_PORT": str(PRIMARY_PORT),
        "NODE_ADDR": node_ip,
        "NODE_RANK": str(rank),
        "NUM_NODES": str(nodes),
        "NUM_TRAINERS": str(gpus_per_node),
        "HOST_NODE_ADDR": f"{primary_ip}:{RENDEZVOUS_PORT}",
        "WORLD_SIZE": str(nodes * gpus_per_node),
    }


def _next_subnet(world: World) -> int:
    seq = int(world.store.get_setting("cluster_seq") or 0) + 1
    world.store.set_setting("cluster_seq", seq)
    return seq


def _members(
    world: World,
    cluster: ClusterRecord,
    body: dict[str, Any],
    price: float,
    volume: tuple[str | None, str | None],
) -> list[PodRecord]:
    prefix = cluster.cidr.rsplit(".", 1)[0]
    ips = [f"{prefix}.{rank + 2}" for rank in range(cluster.pod_count)]
    members = []
    for rank, ip in enumerate(ips):
        members.append(
            new_pod(
                world,
                name=f"{cluster.name}-{rank}",
                image=body["image"],
                args=body.get("args", ""),
                disk=body.get("disk", 50),
                ports=body.get("ports", ["22/tcp"]),
                env=body.get("env", {}),
                gpu_id=cluster.gpu_id,
                gpu_count=cluster.gpu_count_per_pod,
                data_center_id=cluster.data_center_id,
                volume_id=volume[0],
                volume_path=volume[1],
                persistent=(body.get("mounts") or {}).get("persistent"),
                start_ssh=body.get("startSsh", False),
                cost_per_gpu=price,
                cluster_id=cluster.id,
                rank=rank,
                fabric_ip=ip,
                cluster_env=node_env(ips[0], ip, rank, cluster.pod_count, cluster.gpu_count_per_pod),
            )
        )
    return members


def create_cluster(world: World, body: dict[str, Any]) -> ClusterRecord:
    if not body.get("image"):
        raise ApiError(
            400, "'image' is required for a cluster (clusters cannot use private registries or templates)."
        )
    check_image(body["image"])
    check_ports(body.get("ports", []))
    compute = body["compute"]
    gpu_id, per_pod, count = compute["gpuTypeId"], compute["gpuCountPerPod"], compute["podCount"]
    price = world.gpu_price(gpu_id, "SECURE", per_pod)
    candidates = world.candidates(gpu_id, body.get("dataCenterIds"))
    candidates, volume_id, volume_path = volume_placement(world, body, "SECURE", candidates)
    world.check_money(price * per_pod * count)
    dc_id = world.place(gpu_id, candidates, per_pod * count)
    seq = _next_subnet(world)
    cluster = ClusterRecord(
        id=new_id(),
        name=body["name"],
        type=body["type"],
        gpu_id=gpu_id,
        gpu_count_per_pod=per_pod,
        pod_count=count,
        data_center_id=dc_id,
        cidr=world.net.cluster_cidr(seq),
        vxlan_id=1000 + seq,
        created_at=world.now(),
    )
    members = _members(world, cluster, body, price, (volume_id, volume_path))
    cluster.pod_ids = [m.id for m in members]
    for member in members:
        world.save(member)
    world.save(cluster)
    world.audit(
        "cluster.create",
        "cluster",
        cluster.id,
        cluster.name,
        dataCenterId=dc_id,
        podIds=cluster.pod_ids,
        cost=round(price * per_pod * count, 4),
    )
    return cluster


def get_cluster(world: World, cluster_id: str) -> ClusterRecord:
    cluster = world.clusters.get(cluster_id)
    if cluster is None:
        raise ApiError(404, f"Cluster {cluster_id!r} was not found.")
    return cluster


def rename_cluster(world: World, cluster: ClusterRecord, name: str) -> ClusterRecord:
    cluster.name = name
    world.save(cluster)
    world.audit("cluster.update", "cluster", cluster.id, cluster.name, fields=["name"])
    return cluster


def member_pods(world: World, cluster: ClusterRecord) -> list[PodRecord]:
    return [world.pods[i] for i in cluster.pod_ids if i in world.pods]


def delete_cluster(world: World, cluster: ClusterRecord) -> None:
    for pod in member_pods(world, cluster):
        delete_pod(world, pod)
    world.forget(cluster)
    world.audit("cluster.delete", "cluster", cluster.id, cluster.name)
