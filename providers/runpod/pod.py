"""`runpod:Pod`: one GPU pod, on-demand (REST v2) or interruptible (legacy GraphQL spot, while it answers:
providers/runpod/spot.py).

`desired_status: EXITED` declares the pod stopped (trainstack:supervisor.release_mode stop): an update stops
it (POST /v2/pods/{id}/action), its GPUs are released and only its volume disk bills; back to RUNNING, an
update starts the same pod again and counts the boot in the `boots` output (a new boot is a new run, and its
container has new SSH host keys).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, ReadResult, UpdateResult

from common import contract
from facts.pods import PodStatus, is_halted, is_terminal
from providers.common import InputModel
from providers.resource import TypedResource
from providers.runpod import catalog, errors, spot
from providers.runpod.base import (
    UNKNOWN,
    RunPodProvider,
    args_of,
    boot_floor_s,
    is_blank,
    is_unknown,
    ready_timeout,
    wait_for,
)
from providers.runpod.capacity import stock_output
from providers.runpod.models import PodSpec

if TYPE_CHECKING:  # the client (and httpx) load only where a verb runs
    from providers.runpod.client import RunPodClient
    from providers.runpod.records import (
        ApiPod,
        MountsRequest,
        PodCreate,
        PodPatch,
        SpotPodRent,
    )

# Fixed at create time by RunPod (RunPod REST v2 OpenAPI: `PodUpdateInput` has no such field): changing them
# means a new pod.
_REPLACE = frozenset(
    {
        "gpu_type_id",
        "gpu_count",
        "cloud",
        "data_center_ids",
        "volume_id",
        "capacity",
        "bid_per_gpu",
        "min_cuda_version",
        "start_ssh",
        "registry_id",  # the credential a pod pulled its image with: a new one means a new pod
    }
)
# What PATCH /v2/pods/{id} can change, input name -> request field.
_PATCHABLE = {
    "name": "name",
    "image": "image",
    "args": "args",
    "env": "env",
    "ports": "ports",
    "container_disk_gb": "disk",
    "global_networking": "global_networking",
    "volume_mount_path": "mounts",
}
STOPPED = "EXITED"
_NEVER_CREATED_STOPPED = (
    "is declared stopped (trainstack:run.phase released with trainstack:supervisor.release_mode stop) but "
    "does not exist, so there is nothing to stop; set trainstack:run.phase active to rent it"
)
# Why a terminal pod will never be ready; one entry per terminal PodStatus (tests/facts checks).
FAILED_REASONS = {
    PodStatus.ERROR: "the container is in an unrecoverable error state",
    PodStatus.EXITED: "the container exited",
    PodStatus.TERMINATED: "the pod was terminated (spot pods can be reclaimed)",
}
# GraphQL refusals that mean "no spot here" rather than a problem with the account.
_SPOT_REFUSALS = (
    errors.NoCapacityError,
    errors.GraphQLError,
    errors.InvalidRequestError,
    errors.GoneError,  # GraphQL retired (docs/RUNPOD-CONTRACT.md)
    errors.RateLimitedError,
)


def _mounts(args: PodSpec) -> MountsRequest | None:
    from providers.runpod.records import MountsRequest, NetworkMountRequest

    if not args.volume_id:
        return None
    return MountsRequest(network=[NetworkMountRequest(volume_id=args.volume_id, path=args.volume_mount_path)])


def create_body(args: PodSpec) -> PodCreate:
    from providers.runpod.records import GpuRequest, PodCreate

    gpu = GpuRequest(id=args.gpu_type_id, count=args.gpu_count, min_cuda_version=args.min_cuda_version)
    return PodCreate(
        name=args.name,
        image=args.image,
        gpu=gpu,
        cloud=args.cloud,
        data_center_ids=args.data_center_ids or None,
        env=args.env,
        ports=args.ports,
        args=args.args,
        disk=args.container_disk_gb,
        mounts=_mounts(args),
        global_networking=args.global_networking,
        start_ssh=args.start_ssh,
        registry=args.registry_id,
    )


def spot_body(args: PodSpec) -> SpotPodRent:
    from providers.runpod.records import SpotPodRent

    assert args.bid_per_gpu is not None  # enforced by PodSpec.rule_failures at check time
    return SpotPodRent(
        name=args.name,
        image_name=args.image,
        gpu_type_id=args.gpu_type_id,
        gpu_count=args.gpu_count,
        bid_per_gpu=args.bid_per_gpu,
        cloud_type=args.cloud,
        data_center_id=args.data_center_ids[0] if args.data_center_ids else None,
        container_disk_in_gb=args.container_disk_gb,
        docker_args=args.args,
        ports=",".join(args.ports) or None,
        env=[{"key": k, "value": v} for k, v in args.env.items()],
        network_volume_id=args.volume_id,
        volume_mount_path=args.volume_mount_path if args.volume_id else None,
        start_ssh=args.start_ssh,
    )


def patch_body(old: Mapping[str, Any], args: PodSpec) -> PodPatch | None:
    from providers.runpod.records import PodPatch

    new = args.model_dump()
    fields = {_PATCHABLE[k] for k in _PATCHABLE if old.get(k) != new[k]}
    if not fields:
        return None
    values: dict[str, Any] = {
        "name": args.name,
        "image": args.image,
        "args": args.args,
        "env": args.env,
        "ports": args.ports,
        "disk": args.container_disk_gb,
        "global_networking": args.global_networking,
        "mounts": _mounts(args),
    }
    return PodPatch(**{f: values[f] for f in fields})


def probe(pod: ApiPod) -> tuple[bool, str | None]:
    """Ready = RUNNING, runtime reported and SSH mapped (status alone can read RUNNING too early)."""
    if is_terminal(pod.status):
        return False, FAILED_REASONS[PodStatus(pod.status)]
    ready = pod.status == PodStatus.RUNNING and pod.runtime is not None
    return ready and pod.ssh_endpoint() is not None, None


class PodProvider(RunPodProvider):
    """Lifecycle of `runpod:Pod`; image, args, env, ports, name, disk change in place via PATCH."""

    owner_id_in_env = True

    args_model = PodSpec
    replace_keys = _REPLACE
    # A second 8-GPU pod beside the old one doubles spend and often finds no capacity.
    delete_before_replace = True
    update_warning = "updating a RunPod pod restarts its container; data outside the volume is lost"

    def transition_failures(self, olds: Mapping[str, Any], new: InputModel) -> list[CheckFailure]:
        assert isinstance(new, PodSpec)
        if not olds and new.desired_status == STOPPED:  # a create: there is nothing to stop
            return [CheckFailure("desired_status", f"pod {new.name!r} {_NEVER_CREATED_STOPPED}")]
        return []

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        result = super().diff(id_, olds, news)
        # Stopped as declared, or declared stopped before (an update starts it): not a pod to rent again.
        declared_stop = STOPPED in (news.get("desired_status"), olds.get("desired_status"))
        if is_halted(str(olds.get("status"))) and not result.replaces and not declared_stop:
            # Refresh saw the pod stopped: a preempted spot pod, or one stopped outside Pulumi. Its GPUs
            # are gone, so `up` brings the capacity back by renting the pod again (spot or on-demand as
            # `capacity` says); checkpoints survive in the bucket and on the volume.
            return DiffResult(changes=True, replaces=["status"], delete_before_replace=True)
        return result

    def same(self, key: str, old: Any, new: Any) -> bool:
        # The candidates' order only steers where a pod is created next (the supervisor moves a data center
        # that failed twice last): a placed pod is not replaced for it.
        if key == "data_center_ids" and isinstance(old, list) and isinstance(new, list):
            return sorted(map(str, old)) == sorted(map(str, new))
        if key == "desired_status":  # a state from before the input existed holds none: it ran
            return (old or "RUNNING") == (new or "RUNNING")
        return super().same(key, old, new)

    def catalog_failures(self, values: Mapping[str, Any]) -> list[CheckFailure]:
        failures = super().catalog_failures(values)
        gpu, cloud, capacity, bid = (
            values.get(k) for k in ("gpu_type_id", "cloud", "capacity", "bid_per_gpu")
        )
        if capacity == "on_demand" or any(is_unknown(v) for v in (gpu, cloud)):
            return failures
        book = catalog.price_book(self.client)
        count = values.get("gpu_count")
        priced = lambda: spot.on_demand_line(  # noqa: E731
            str(gpu),
            1 if is_unknown(count) else int(count or 1),
            book.gpu_hourly(str(gpu), str(cloud)),
            book.source,
        )
        failures += spot.capacity_failures(values, self.client, priced)
        if bid is None or is_unknown(bid):
            return failures
        on_demand = book.gpu_hourly(str(gpu), str(cloud))
        if float(bid) > on_demand:
            # A spot pod is billed its bid: above on-demand it costs more than the on-demand pod.
            reason = f"bids ${float(bid):g}/GPU-h, above the on-demand ${on_demand:g} ({book.source})"
            reason += "; bid at most the on-demand price, or use capacity on_demand"
            failures.append(CheckFailure("bid_per_gpu", reason))
        return failures

    computed_keys = frozenset({*RunPodProvider.computed_keys, "availability"})

    def computed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        stock = stock_output(
            self.client,
            values,
            product="POD",
            count=values.get("gpu_count", 1),
            nodes=1,
            cloud=values.get("cloud", "SECURE"),
        )
        return {**self.costs(values), "availability": stock}

    def costs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        if values.get("desired_status") == STOPPED:
            # A stopped pod bills its volume disk alone (its container disk is wiped at the stop); these pods
            # mount a network volume or nothing, which bills under its own resource.
            source = "stopped: no GPU, no container disk (docs.runpod.io/pods/storage)"
            return {"cost_per_hour": 0.0, "storage_cost_per_month": 0.0, "price_source": source}
        disk = values.get("container_disk_gb")
        storage = UNKNOWN if is_unknown(disk) else catalog.container_disk_monthly(int(disk or 0))
        needed: list[Any] = [
            values.get(k) for k in ("gpu_type_id", "gpu_count", "cloud", "capacity", "bid_per_gpu")
        ]
        if any(is_unknown(v) for v in needed):
            return {"cost_per_hour": UNKNOWN, "storage_cost_per_month": storage, "price_source": UNKNOWN}
        gpu, count, cloud, capacity, bid = needed
        book = catalog.price_book(self.client)
        hourly = book.gpu_hourly(str(gpu), str(cloud))
        if capacity != "on_demand" and bid is not None:
            # Spot and auto are priced at the dearer of the bid and on-demand: a spot pod is billed its bid
            # (even above on-demand), and auto may fall back to on-demand (docs/ARCHITECTURE.md).
            hourly = max(float(bid), hourly)
        cost = round(hourly * int(count), 4)
        return {"cost_per_hour": cost, "storage_cost_per_month": storage, "price_source": book.source}

    def _launch(self, client: RunPodClient, args: PodSpec) -> tuple[str, str]:
        if args.capacity == "on_demand" or (args.capacity == "auto" and spot.graphql_gone(self.client)):
            return client.create_pod(create_body(args)).id, "on_demand"
        try:
            return client.rent_spot_pod(spot_body(args)), "spot"
        except _SPOT_REFUSALS as exc:
            if args.capacity == "spot":
                raise errors.SpotRefusedError(
                    f"RunPod refused spot capacity for {args.gpu_count} x {args.gpu_type_id}; set "
                    "capacity: on_demand, or capacity: auto to fall back to on-demand automatically",
                    status=exc.status,
                    method=exc.method,
                    path=exc.path,
                ) from None
        return client.create_pod(create_body(args)).id, "on_demand"

    def _wait(self, client: RunPodClient, pod_id: str, args: PodSpec, first_poll_s: float = 0.0) -> ApiPod:
        return wait_for(
            client,
            lambda: client.find_pod(pod_id),
            probe,
            ready_timeout(args.ready_timeout_s),
            f"pod {args.name!r} ({pod_id})",
            first_poll_s=first_poll_s,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        args = args_of(PodSpec, props)
        if args.desired_status == STOPPED:  # a replacement of a stopped pod: renting one to stop it is waste
            raise errors.RunPodError(f"pod {args.name!r} {_NEVER_CREATED_STOPPED}")
        with self.client() as client:
            pod_id, obtained = self._launch(client, args)
            try:
                pod = self._wait(client, pod_id, args, first_poll_s=boot_floor_s())
            except errors.RunPodError:
                # create is transactional: never leave a billed pod behind a failed create.
                client.delete_pod(pod_id)
                raise
        return CreateResult(pod_id, self._outs(props, pod, obtained))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            try:
                pod = client.get_pod(id_)
            except errors.NotFoundError:
                return ReadResult(None, {})
        if pod.status == PodStatus.TERMINATED:
            return ReadResult(None, {})
        # Refresh what RunPod reports back; env is kept as declared because RunPod injects keys
        # (PUBLIC_KEY for startSsh) that would otherwise show as drift and be PATCHed away.
        drift = {
            "name": pod.name,
            "image": pod.image,
            "args": pod.args,
            "ports": pod.ports,
            "container_disk_gb": pod.disk,
        }
        # An empty answer for a field nobody set is not drift (RunPod reports unset args as "").
        # None means RunPod did not report the field.
        reported = {k: v for k, v in drift.items() if v is not None}
        changed = {k: v for k, v in reported.items() if not (is_blank(v) and is_blank(props.get(k)))}
        props = {**props, **changed}
        return ReadResult(
            id_, self._outs(props, pod, props.get("capacity_obtained"), int(props.get("boots") or 0))
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = args_of(PodSpec, news)
        body = patch_body(olds, args)
        boots = int(olds.get("boots") or 0)
        with self.client() as client:
            if args.desired_status == STOPPED:
                pod = self._stop(client, id_, args)
                if body is not None:  # a stopped pod's PATCH applies at its next start
                    client.update_pod(id_, body)
            elif olds.get("desired_status") == STOPPED:
                if body is not None:
                    client.update_pod(id_, body)
                pod = self._start(client, id_, args)
                boots += 1
            elif body is None:
                pod = client.get_pod(id_)
            else:
                client.update_pod(id_, body)
                pod = self._wait(client, id_, args)  # the PATCH restarted the container
        return UpdateResult(self._outs(news, pod, olds.get("capacity_obtained"), boots))

    def _stop(self, client: RunPodClient, pod_id: str, args: PodSpec) -> ApiPod:
        """Stop the pod and wait until RunPod reports it halted; a pod already stopped stays as it is."""
        # A 409 means not valid in its status: already EXITED (or ERROR); the wait below says which.
        with contextlib.suppress(errors.ConflictError):
            client.pod_action(pod_id, "stop")
        return wait_for(
            client,
            lambda: client.get_pod(pod_id),
            lambda p: (is_halted(p.status), None),
            ready_timeout(args.ready_timeout_s),
            f"stopping pod {args.name!r} ({pod_id})",
        )

    def _start(self, client: RunPodClient, pod_id: str, args: PodSpec) -> ApiPod:
        """Start a pod stopped by an earlier update and wait until it is ready (a new container)."""
        try:
            client.pod_action(pod_id, "start")
        except errors.ConflictError:
            pass  # not valid in its status: running already (started by hand); the wait checks it
        except (errors.NoCapacityError, errors.InvalidRequestError) as exc:
            raise errors.RunPodError(
                f"pod {args.name!r} ({pod_id}) cannot start again: {exc}. Its machine may have no free GPU "
                "now; replace it (`pulumi up --replace <its URN>`), or use release_mode delete"
            ) from None
        return self._wait(client, pod_id, args, first_poll_s=boot_floor_s())

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        with self.client() as client:
            client.delete_pod(id_)  # already gone (404) counts as deleted

    def _outs(self, props: Mapping[str, Any], pod: ApiPod, obtained: Any, boots: int = 0) -> dict[str, Any]:
        ssh = pod.ssh_endpoint()
        net = pod.global_networking
        return self.outputs(
            self.carried(props),
            pod_id=pod.id,
            status=pod.status,
            capacity_obtained=obtained,
            data_center_id=pod.data_center_id,
            ssh_host=ssh[0] if ssh else None,
            ssh_port=ssh[1] if ssh else None,
            private_ip=net.ip if net else None,
            internal_dns=net.internal_dns if net else None,
            boots=boots,
        )


class Pod(TypedResource, module=contract.POD.module, name=contract.POD.name):
    """A RunPod GPU pod (`pulumi-python:dynamic/runpod:Pod`); inputs: `PodInputs`, checked as `PodSpec`."""

    provider_factory = PodProvider

    pod_id: pulumi.Output[str]
    status: pulumi.Output[str]
    capacity_obtained: pulumi.Output[str]
    data_center_id: pulumi.Output[str]
    ssh_host: pulumi.Output[str]
    ssh_port: pulumi.Output[int]
    private_ip: pulumi.Output[str]
    internal_dns: pulumi.Output[str]
    boots: pulumi.Output[int]  # times an update started the pod again after a declared stop (0 at create)
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]
    price_source: pulumi.Output[str]
