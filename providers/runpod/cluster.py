"""`runpod:InstantCluster`: 2-8 nodes on one fabric in one data center (the way to run 64 x H100)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, UpdateResult

from common import contract
from facts.pods import is_terminal
from providers.resource import TypedResource
from providers.runpod import capacity, catalog, errors
from providers.runpod.base import (
    UNKNOWN,
    RunPodProvider,
    args_of,
    boot_floor_s,
    is_unknown,
    ready_timeout,
    wait_for,
)
from providers.runpod.models import ClusterSpec
from providers.runpod.outputs import ClusterNode

if TYPE_CHECKING:  # the client (and httpx) load only where a verb runs
    from providers.runpod.client import RunPodClient
    from providers.runpod.records import (
        ApiCluster,
        ApiPod,
        ClusterCreate,
    )

# In place: the name (PATCH /v2/clusters/{id} is a rename) and what never reaches RunPod (training
# metadata, our own readiness timeout); everything else replaces.
# `data_center_ids` are candidates for the next create: a placed cluster moves only when its data center
# leaves them (diff below).
_IN_PLACE = frozenset({"name", "training", "ready_timeout_s", "data_center_ids"})
_REPLACE = frozenset(ClusterSpec.model_fields) - _IN_PLACE


def create_body(args: ClusterSpec, data_center_id: str | None = None) -> ClusterCreate:
    from providers.runpod.records import (
        ClusterComputeRequest,
        ClusterCreate,
        MountsRequest,
        NetworkMountRequest,
    )

    mounts = None
    if args.volume_id:
        mounts = MountsRequest(
            network=[NetworkMountRequest(volume_id=args.volume_id, path=args.volume_mount_path)]
        )
    compute = ClusterComputeRequest(
        gpu_type_id=args.gpu_type_id, gpu_count_per_pod=args.gpu_count_per_pod, pod_count=args.pod_count
    )
    return ClusterCreate(
        name=args.name,
        type=args.cluster_type,
        compute=compute,
        image=args.image,
        args=args.args,
        disk=args.container_disk_gb,
        env=args.env,
        ports=args.ports,
        data_center_ids=[data_center_id] if data_center_id else None,
        mounts=mounts,
        start_ssh=args.start_ssh,
    )


def member_ready(pod: ApiPod) -> bool:
    """RUNNING with a rank and a fabric IP, and (as for pods) runtime reported with SSH mapped."""
    ranked = pod.cluster is not None and pod.cluster.rank is not None and bool(pod.cluster.ip)
    return pod.status == "RUNNING" and ranked and pod.runtime is not None and pod.ssh_endpoint() is not None


def make_probe(pod_count: int) -> Callable[[list[ApiPod]], tuple[bool, str | None]]:
    def probe(pods: list[ApiPod]) -> tuple[bool, str | None]:
        broken = [p.id for p in pods if is_terminal(p.status)]
        if broken:
            return False, f"member pods {broken} stopped or failed"
        return len(pods) == pod_count and all(member_ready(p) for p in pods), None

    return probe


def nodes_of(pods: list[ApiPod]) -> list[dict[str, Any]]:
    """Members in rank order (`ClusterNode` records, as output maps): rank, pod_id, fabric ip, direct SSH."""
    out = []
    for pod in sorted(
        pods, key=lambda p: p.cluster.rank if p.cluster and p.cluster.rank is not None else 1 << 30
    ):
        ssh = pod.ssh_endpoint()
        node = ClusterNode(
            rank=pod.cluster.rank if pod.cluster else None,
            pod_id=pod.id,
            ip=pod.cluster.ip if pod.cluster else None,
            ssh_host=ssh[0] if ssh else None,
            ssh_port=ssh[1] if ssh else None,
        )
        out.append(node.to_output())
    return out


def _primary_ssh(cluster: ApiCluster, nodes: list[dict[str, Any]]) -> str | None:
    if cluster.primary is not None and cluster.primary.ssh_endpoint:
        return cluster.primary.ssh_endpoint
    first = nodes[0] if nodes else None
    if first and first["ssh_host"] and first["ssh_port"]:
        return f"{first['ssh_host']}:{first['ssh_port']}"
    return None


class InstantClusterProvider(RunPodProvider):
    """Lifecycle of `runpod:InstantCluster`; ready when every member is RUNNING with a rank."""

    owner_id_in_env = True

    args_model = ClusterSpec
    replace_keys = _REPLACE
    # Two 64-GPU clusters side by side would double a $170-255/h bill and rarely fit the spend limit.
    delete_before_replace = True

    computed_keys = frozenset({*RunPodProvider.computed_keys, "availability"})

    def computed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        stock = capacity.stock_output(
            self.client,
            values,
            product="CLUSTER",
            count=values.get("gpu_count_per_pod", 8),
            nodes=values.get("pod_count"),
            cloud="SECURE",
        )
        return {**self.costs(values), "availability": stock}

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        result = super().diff(id_, olds, news)
        placed, wanted = olds.get("data_center_id"), news.get("data_center_ids")
        moved = (
            news.get("data_center_id") is None
            and isinstance(wanted, list)
            and bool(wanted)
            and not any(is_unknown(w) for w in wanted)
            and isinstance(placed, str)
            and placed not in wanted
        )
        replaces = list(result.replaces or [])
        if moved and "data_center_ids" not in replaces:
            # The stack no longer lists the data center the cluster runs in: a new one, in a candidate.
            replaces = sorted({*replaces, "data_center_ids"})
            return DiffResult(changes=True, replaces=replaces, delete_before_replace=True)
        return result

    def costs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        needed: list[Any] = [values.get(k) for k in ("gpu_type_id", "gpu_count_per_pod", "pod_count")]
        disk: Any = values.get("container_disk_gb")
        if any(is_unknown(v) for v in [*needed, disk]):
            return {"cost_per_hour": UNKNOWN, "storage_cost_per_month": UNKNOWN, "price_source": UNKNOWN}
        gpu, per_pod, pods = needed
        book = catalog.price_book(self.client)
        hourly = book.gpu_hourly(str(gpu), "SECURE")  # Instant Clusters run in Secure Cloud
        return {
            "cost_per_hour": round(hourly * int(per_pod) * int(pods), 4),
            "storage_cost_per_month": catalog.container_disk_monthly(int(disk) * int(pods)),
            "price_source": book.source,
        }

    def _wait(self, client: RunPodClient, cluster_id: str, args: ClusterSpec) -> list[ApiPod]:
        return wait_for(
            client,
            lambda: client.list_cluster_pods(cluster_id),
            make_probe(args.pod_count),
            ready_timeout(args.ready_timeout_s),
            f"cluster {args.name!r} ({cluster_id})",
            first_poll_s=boot_floor_s(),
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        args = args_of(ClusterSpec, props)
        with self.client() as client:
            cluster = self._create_in_order(client, args)
            try:
                pods = self._wait(client, cluster.id, args)
                cluster = client.get_cluster(cluster.id)
            except errors.RunPodError:
                client.delete_cluster(cluster.id)  # transactional: no billed half-cluster left behind
                raise
        return CreateResult(cluster.id, self._outs(props, cluster, pods))

    def _create_in_order(self, client: RunPodClient, args: ClusterSpec) -> ApiCluster:
        """POST the cluster to each candidate data center in turn while RunPod answers "no instances
        available" (RunPod's guidance for that 400: try the next candidate). A 400 created nothing, so
        the next POST cannot make a second cluster; any other error ends the loop at once."""
        if args.data_center_id or not args.data_center_ids:
            order: list[str | None] = [args.data_center_id]
        else:
            query = capacity.CapacityQuery(args.gpu_type_id, args.gpu_count_per_pod, "CLUSTER", "SECURE")
            read = capacity.read_capacity(self.client, query)
            order = list(capacity.create_order(args.data_center_ids, read))
        refused: list[str] = []
        for dc in order:
            try:
                return client.create_cluster(create_body(args, dc))
            except errors.NoCapacityError as exc:
                refused.append(dc or "any data center")
                last = exc
        pinned = (
            f" (pinned there by its network volume; the other candidates {args.data_center_ids} need the "
            "volume in their data center)"
            if args.data_center_id and len(args.data_center_ids) > 1
            else ""
        )
        raise errors.NoCapacityError(
            f"RunPod has no instances available for {args.pod_count} x {args.gpu_count_per_pod} "
            f"{args.gpu_type_id} in {', '.join(refused)}{pinned}; run `scripts/up` again later, or add "
            "data centers to trainstack:cluster.data_centers",
            status=last.status,
            method=last.method,
            path=last.path,
        ) from None

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            try:
                cluster = client.get_cluster(id_)
                pods = client.list_cluster_pods(id_)
            except errors.NotFoundError:
                return ReadResult(None, {})
        live = [p for p in pods if not is_terminal(p.status)]  # a terminal member is lost for training
        refreshed: dict[str, Any] = {**props, "name": cluster.name}
        declared = props.get("pod_count")
        if isinstance(declared, int | float) and len(live) < declared:
            # A member was lost (host failure, out-of-band termination). RunPod cannot add a node to an
            # Instant Cluster, so the refreshed node count makes the next `up` replace the cluster.
            refreshed["pod_count"] = float(len(live))
        return ReadResult(id_, self._outs(refreshed, cluster, live))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = args_of(ClusterSpec, news)
        with self.client() as client:
            if olds.get("name") != args.name:
                client.rename_cluster(id_, args.name)
            cluster = client.get_cluster(id_)
            pods = client.list_cluster_pods(id_)
        return UpdateResult(self._outs(news, cluster, pods))

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        with self.client() as client:
            client.delete_cluster(id_)

    def same(self, key: str, old: Any, new: Any) -> bool:
        # data_center_id None means "any": the placed data center is reported, not a change.
        if key == "data_center_id" and new is None:
            return True
        return bool(old == new)

    def _outs(self, props: Mapping[str, Any], cluster: ApiCluster, pods: list[ApiPod]) -> dict[str, Any]:
        nodes = nodes_of(pods)
        status = "RUNNING" if make_probe(len(pods))(pods)[0] and pods else "DEGRADED"
        return self.outputs(
            self.carried(props),
            cluster_id=cluster.id,
            nodes=nodes,
            status=status,
            network_cidr=cluster.network.cidr if cluster.network else None,
            primary_ssh=_primary_ssh(cluster, nodes),
            data_center_id=cluster.data_center_id or props.get("data_center_id"),
        )


class InstantCluster(TypedResource, module=contract.CLUSTER.module, name=contract.CLUSTER.name):
    """A RunPod Instant Cluster (`pulumi-python:dynamic/runpod:InstantCluster`); see InstantClusterInputs."""

    provider_factory = InstantClusterProvider

    cluster_id: pulumi.Output[str]
    nodes: pulumi.Output[list[dict[str, Any]]]
    network_cidr: pulumi.Output[str]
    primary_ssh: pulumi.Output[str]
    status: pulumi.Output[str]  # RUNNING, or DEGRADED while a member is not ready
    data_center_id: pulumi.Output[str]
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]
    price_source: pulumi.Output[str]
