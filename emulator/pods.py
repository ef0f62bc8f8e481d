"""Pod rules: create (placement, money, volumes), patch, actions and delete, as RunPod documents them."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from emulator.models import PodRecord
from emulator.problems import NO_CAPACITY, ApiError
from emulator.world import World, new_id

_PORT = re.compile(r"^(\d{1,5})/(tcp|http|udp)$")
# Fields whose change resets a running container (RunPod REST v2 docs for PATCH /v2/pods/{id}: data outside
# the volume is lost).
_RESETTING = ("image", "args", "disk", "ports", "env", "registry", "mounts")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


# A container image reference as registries parse it, `[host[:port]/]path[:tag][@algo:hex]` (the grammar of
# github.com/distribution/reference). Written here independently of stackconfig/image_ref.py on purpose: the
# local RunPod models RunPod, so it must catch a reference the stack's own check lets through.
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    r"(?:(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:\d))(?::\d+)?/)?"
    rf"{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::\w[\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def check_image(image: object) -> None:
    if not isinstance(image, str) or not _IMAGE.fullmatch(image):
        raise ApiError(
            400,
            "Invalid image reference; use [registry/]name[:tag][@digest].",
            errors=["$.image: not a valid container image reference"],
        )


def check_ports(ports: list[str]) -> None:
    bad = [p for p in ports if not (m := _PORT.match(p)) or not 0 < int(m.group(1)) < 65536]
    if bad:
        raise ApiError(400, f"Invalid port spec(s) {bad}; use '<port>/tcp' or '<port>/http', e.g. '22/tcp'.")


def new_pod(world: World, *, ident: str | None = None, **fields: Any) -> PodRecord:
    """A pod record with its addresses derived from its id (TEST-NET-2 public IPs, never routable)."""
    pod_id = ident or new_id()
    digest = _digest(pod_id)
    now = world.now()
    fields.setdefault("cuda_version", world.host_cuda(fields["data_center_id"]))
    return PodRecord(
        id=pod_id,
        created_at=now,
        boot_at=now,
        public_ip=f"198.51.100.{digest % 254 + 1}",
        port_base=20000 + digest % 40000,
        gn_ip=world.net.pod_ip(digest),
        **fields,
    )


def volume_placement(
    world: World, body: dict[str, Any], cloud: str, candidates: list[str]
) -> tuple[list[str], str | None, str | None]:
    """Narrow candidates to the attached volume's data center; refuse a pod elsewhere."""
    network = (body.get("mounts") or {}).get("network") or []
    if not network:
        return candidates, None, None
    volume_id, path = network[0]["volumeId"], network[0]["path"]
    volume = world.volumes.get(volume_id)
    if volume is None:
        raise ApiError(400, f"Network volume {volume_id!r} does not exist.")
    if cloud != "SECURE":
        raise ApiError(400, "Network volumes attach to Secure Cloud only; set cloud to SECURE.")
    if body.get("dataCenterIds") and volume.data_center_id not in candidates:
        raise ApiError(
            400,
            f"Network volume {volume_id!r} lives in data center {volume.data_center_id}; a pod using it "
            f"must be created there too, but the request allows only {', '.join(candidates)}.",
        )
    return [volume.data_center_id], volume_id, path


def global_candidates(world: World, candidates: list[str]) -> list[str]:
    usable = [d for d in candidates if (dc := world.catalog.data_center(d)) is not None and dc.globalNetwork]
    if not usable:
        raise ApiError(400, f"Global networking is not available in {', '.join(candidates)}.")
    return usable


def create_pod(world: World, body: dict[str, Any]) -> PodRecord:
    if ("gpu" in body) == ("cpu" in body):
        raise ApiError(400, "Supply exactly one of 'gpu' or 'cpu'.")
    if "cpu" in body:
        raise ApiError(400, "CPU pods are not offered by the local RunPod; request a GPU pod.")
    if "templateId" in body:
        raise ApiError(404, f"Template {body['templateId']!r} was not found.")
    check_image(body.get("image"))
    check_ports(body.get("ports", []))
    check_mounts(body.get("mounts") or {})
    gpu = body["gpu"]
    check_cuda(gpu)
    cloud, gpu_id, count = body.get("cloud", "SECURE"), gpu["id"], gpu.get("count", 1)
    price = world.gpu_price(gpu_id, cloud, count)
    candidates = world.candidates(gpu_id, body.get("dataCenterIds"))
    candidates, volume_id, volume_path = volume_placement(world, body, cloud, candidates)
    if body.get("globalNetworking"):
        candidates = global_candidates(world, candidates)
    world.check_money(price * count)
    # "Matching is exact, so a version no machine reports yields a capacity error rather than a
    # fallback" (CreateGpuConfig.allowedCudaVersions): machines below the constraint are not candidates.
    candidates = [d for d in candidates if world.host_cuda(d, gpu) is not None]
    if not candidates:
        raise ApiError(400, NO_CAPACITY)
    dc_id = world.place(gpu_id, candidates, count)
    pod = new_pod(
        world,
        **container_fields(body),
        cloud=cloud,
        gpu_id=gpu_id,
        gpu_count=count,
        data_center_id=dc_id,
        volume_id=volume_id,
        volume_path=volume_path,
        global_networking=body.get("globalNetworking", False),
        cost_per_gpu=price,
        cuda_version=world.host_cuda(dc_id, gpu),
    )
    return record_created(world, pod)


def container_fields(body: dict[str, Any]) -> dict[str, Any]:
    """PodRecord fields taken as-is from a v2 create body."""
    return {
        "name": body["name"],
        "image": body["image"],
        "args": body.get("args", ""),
        "disk": body.get("disk", 50),
        "ports": body.get("ports", []),
        "env": body.get("env", {}),
        "registry": body.get("registry"),
        "persistent": (body.get("mounts") or {}).get("persistent"),
        "start_ssh": body.get("startSsh", False),
    }


def record_created(world: World, pod: PodRecord, **detail: Any) -> PodRecord:
    world.save(pod)
    where = {"gpu": pod.gpu_id, "count": pod.gpu_count, "dataCenterId": pod.data_center_id}
    world.audit("pod.create", "pod", pod.id, pod.name, **where, cost=pod.hourly_cost, **detail)
    return pod


def get_pod(world: World, pod_id: str) -> PodRecord:
    pod = world.pods.get(pod_id)
    if pod is None:
        raise ApiError(404, f"Pod {pod_id!r} was not found.")
    return pod


def refuse_member(pod: PodRecord, verb: str) -> None:
    if pod.cluster_id is not None:
        raise ApiError(
            409,
            f"Pod {pod.id} belongs to cluster {pod.cluster_id} and cannot be {verb} here; "
            f"use /v2/clusters/{pod.cluster_id}.",
        )


def check_mounts(mounts: dict[str, Any]) -> None:
    """Mounts: "At-most-one of `persistent` or `network` may be set today (mutually exclusive, enforced
    at the handler with 400 if both are present)"."""
    if "persistent" in mounts and "network" in mounts:
        raise ApiError(400, "Set at most one of mounts.persistent and mounts.network; they are exclusive.")


def check_cuda(gpu: dict[str, Any]) -> None:
    """CreateGpuConfig: "A non-empty set is mutually exclusive with minCudaVersion (400 if both are
    sent). An explicit `[]` states no constraint, so it may accompany a floor"."""
    if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
        raise ApiError(
            400, "Send gpu.allowedCudaVersions (an exact set) or gpu.minCudaVersion (a floor), not both."
        )


def _patch_mounts(pod: PodRecord, mounts: dict[str, Any]) -> None:
    """The PATCH semantics of the spec's Mounts schema, rule by rule."""
    check_mounts(mounts)  # `{}` (or no `mounts`) leaves the existing mount unchanged
    fixed = "the mount kind is fixed when the pod is created; replace the pod to change it"
    if "network" in mounts:
        network = mounts["network"]
        if not network:
            raise ApiError(400, "mounts.network: [] would clear the mount, which is not supported.")
        if pod.volume_id is None:
            raise ApiError(400, f"This pod has no network volume: {fixed}.")
        if network[0]["volumeId"] != pod.volume_id:
            raise ApiError(400, "A network mount's volumeId is immutable; only its path may change.")
        pod.volume_path = network[0]["path"]
    if "persistent" in mounts:
        persistent = mounts["persistent"]
        if pod.persistent is None:
            raise ApiError(400, f"This pod has no persistent mount: {fixed}.")
        if int(persistent["size"]) < int(pod.persistent["size"]):
            raise ApiError(400, "The persistent volume can only grow.")
        pod.persistent = dict(persistent)


def patch_pod(world: World, pod: PodRecord, body: dict[str, Any]) -> PodRecord:
    refuse_member(pod, "updated")
    if "templateId" in body:
        raise ApiError(404, f"Template {body['templateId']!r} was not found.")
    if "image" in body:
        check_image(body["image"])
    check_ports(body.get("ports", []))
    if "mounts" in body:
        _patch_mounts(pod, body["mounts"])
    for field in ("name", "image", "args", "disk", "ports", "env", "registry", "locked"):
        if field in body:
            setattr(pod, field, body[field])
    if "globalNetworking" in body:
        pod.global_networking_next = body["globalNetworking"]
    reset = pod.halted is None and any(f in body for f in _RESETTING)
    if reset:
        pod.boot_at = world.now() - world.timing.provisioning_s
    world.save(pod)
    world.audit("pod.update", "pod", pod.id, pod.name, fields=sorted(body), containerReset=reset)
    return pod


def _boot(world: World, pod: PodRecord, at: float) -> None:
    if pod.global_networking_next is not None:
        pod.global_networking, pod.global_networking_next = pod.global_networking_next, None
    pod.halted, pod.boot_at, pod.preempt_at = None, at, None


def start_pod(world: World, pod: PodRecord) -> None:
    world.check_money(pod.hourly_cost)
    world.place(pod.gpu_id, [pod.data_center_id], pod.gpu_count)
    _boot(world, pod, world.now())


def act(world: World, pod: PodRecord, action: str) -> PodRecord | None:
    """Apply a pod action; `None` when the pod is gone (terminate)."""
    refuse_member(pod, "changed")
    status = world.status(pod)
    allowed = {
        "RUNNING": {"stop", "restart", "terminate"},
        "PROVISIONING": {"stop", "terminate"},
        "STARTING": {"stop", "terminate"},
    }.get(status, {"start", "terminate"})
    if action not in allowed:
        raise ApiError(
            409, f"Action {action!r} is not valid while the pod is {status}; allowed: {sorted(allowed)}."
        )
    if pod.locked and action in ("stop", "restart"):
        raise ApiError(409, f"Pod {pod.id} is locked; unlock it with PATCH {{'locked': false}} first.")
    if action == "terminate":
        delete_pod(world, pod)
        return None
    if action == "start":
        start_pod(world, pod)
    elif action == "stop":
        pod.halted = "EXITED"
    else:
        _boot(world, pod, world.now() - world.timing.provisioning_s)
    world.save(pod)
    world.audit(f"pod.{action}", "pod", pod.id, pod.name)
    return pod


def delete_pod(world: World, pod: PodRecord, *, event: str = "pod.delete") -> None:
    world.forget(pod)
    world.audit(event, "pod", pod.id, pod.name)
