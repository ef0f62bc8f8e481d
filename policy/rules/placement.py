"""Placement and correctness policies: data centers, GPU types, networking for multi-node jobs, CUDA."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pydantic import Field

from facts.gpus import GPUS
from policy.rules.common import (
    CLUSTER,
    COMPUTE_TYPES,
    POD,
    VOLUME,
    PolicyConfig,
    Unknown,
    config_schema,
    elements,
    job_nodes,
    kind,
    listing,
    load_config,
    read,
    text,
    truthy,
)


def volumes_of(res: PolicyResource, volumes: Sequence[PolicyResource]) -> list[PolicyResource]:
    """The stack's network volumes this pod or cluster mounts.

    After create, `volume_id` is known and matches the volume's output. At preview it is unknown, so
    the engine's property dependencies (which resource fed `volume_id`) name the volume instead; a
    lone volume among plain dependencies is the last resort.
    """
    volume_id = read(res.props, "volume_id")
    by_id = [v for v in volumes if isinstance(volume_id, str) and read(v.props, "volume_id") == volume_id]
    if by_id:
        return by_id
    fed = [d for d in res.property_dependencies.get("volume_id", []) if d.resource_type == VOLUME]
    if fed or not isinstance(volume_id, Unknown):
        return fed  # a known id that no stack volume has is an existing volume: nothing to compare
    plain = [d for d in res.dependencies if d.resource_type == VOLUME]
    return plain if len(plain) == 1 else []


def data_centers(res: PolicyResource) -> list[str] | None:
    """Where a pod or cluster may land: the chosen data center once known, else its allowed list.

    None when that is not known yet; an empty list when nothing pins it.
    """
    chosen = read(res.props, "data_center_id")
    if isinstance(chosen, str) and chosen:
        return [chosen]
    if res.resource_type == CLUSTER:
        return None if isinstance(chosen, Unknown) else []
    allowed = read(res.props, "data_center_ids")
    items = elements(allowed)
    if isinstance(allowed, Unknown) or any(isinstance(i, Unknown) for i in items):
        return None
    return [i for i in items if isinstance(i, str) and i]


class SameDataCenterConfig(PolicyConfig):
    require_pinned: bool = Field(
        True,
        description="A pod or cluster with a volume must name its data center (else RunPod may pick one).",
    )


def _placement_problem(res: PolicyResource, volume_dc: str, cfg: SameDataCenterConfig) -> str | None:
    centers = data_centers(res)
    if centers is None:
        return None
    if not centers:
        return "names no data center" if cfg.require_pinned else None
    if volume_dc in centers:
        return None
    return f"is placed in {', '.join(centers)}"


def check_same_data_center(args: StackValidationArgs, report: ReportViolation) -> None:
    """A network volume and the pods or cluster that mount it are in the same data center."""
    cfg = load_config(SameDataCenterConfig, args.get_config(), report)
    if cfg is None:
        return
    volumes = [r for r in args.resources if r.resource_type == VOLUME]
    for res in (r for r in args.resources if r.resource_type in COMPUTE_TYPES):
        for volume in volumes_of(res, volumes):
            volume_dc = text(read(volume.props, "data_center_id"))
            problem = None if volume_dc is None else _placement_problem(res, volume_dc, cfg)
            if problem is None:
                continue
            field = "data_center_id" if res.resource_type == CLUSTER else "data_center_ids"
            report(
                f"{kind(res)} '{res.name}' mounts network volume '{volume.name}' in {volume_dc} but "
                f"{problem}: RunPod attaches a network volume only to pods in its own data center. "
                f"Set {field} to ['{volume_dc}'] (or move the volume).",
                res.urn,
            )


class GpuTypesConfig(PolicyConfig):
    allowed_gpu_types: tuple[str, ...] = Field(
        tuple(sorted(spec.api_id for spec in GPUS.values())),
        description="RunPod GPU type ids (long names, e.g. 'NVIDIA H100 80GB HBM3') pods may use.",
    )


def check_allowed_gpu_types(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Pods and clusters use a GPU type from `allowed_gpu_types`."""
    if args.resource_type not in COMPUTE_TYPES:
        return
    cfg = load_config(GpuTypesConfig, args.get_config(), report)
    gpu = read(args.props, "gpu_type_id")
    if cfg is None or isinstance(gpu, Unknown) or gpu in cfg.allowed_gpu_types:
        return
    said = f"GPU type '{gpu}'" if text(gpu) else "no gpu_type_id"
    report(
        f"{kind(args)} '{args.name}' asks for {said}; allowed: {', '.join(cfg.allowed_gpu_types)}. "
        "Use one of those RunPod GPU ids, or add this one to `allowed_gpu_types` in the policy config.",
        None,
    )


class GlobalNetworkingConfig(PolicyConfig):
    nodes_env_key: str = Field("NUM_NODES", description="Env key saying how many nodes a job spans.")
    job_env_key: str = Field(
        "TRAINING_JOB",
        description="Env key naming a pod's training job; pods without it share one unnamed job.",
    )


def multi_node_groups(pods: Sequence[PolicyResource], cfg: GlobalNetworkingConfig) -> dict[str, list[str]]:
    """Pods on global networking grouped by the multi-node job they say they belong to."""
    groups: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        nodes = job_nodes(pod.props, cfg.nodes_env_key)
        if truthy(read(pod.props, "global_networking")) is not True or nodes is None or nodes <= 1:
            continue
        job = text(read(pod.props, "env", cfg.job_env_key))
        groups[f"job '{job}'" if job else f"one {nodes:g}-node job"].append(pod.name)
    return groups


def check_no_global_networking_training(args: StackValidationArgs, report: ReportViolation) -> None:
    """Multi-node training never runs over pods' global networking: it uses an Instant Cluster."""
    cfg = load_config(GlobalNetworkingConfig, args.get_config(), report)
    if cfg is None:
        return
    pods = [r for r in args.resources if r.resource_type == POD]
    for job, names in multi_node_groups(pods, cfg).items():
        if len(names) < 2:
            continue
        report(
            f"pods {listing(names)} form {job} ({cfg.nodes_env_key} > 1) over global networking, which "
            "RunPod caps at 100 Mbps between pods: far too slow for NCCL all-reduce. Declare one "
            "runpod:InstantCluster instead (nodes in one data center on a 3200 Gbps fabric).",
            None,
        )


class CudaConfig(PolicyConfig):
    lowest_min_cuda_version: str = Field(
        "12.0",
        pattern=r"^\d+(\.\d+)*$",
        description="Lowest min_cuda_version a pod may declare (driver must support the image's CUDA).",
    )


def _version(value: str) -> tuple[int, ...] | None:
    parts = value.strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def check_min_cuda_version(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Pods declare a min_cuda_version at or above `lowest_min_cuda_version`."""
    if args.resource_type != POD:
        return
    cfg = load_config(CudaConfig, args.get_config(), report)
    declared = read(args.props, "min_cuda_version")
    if cfg is None or isinstance(declared, Unknown):
        return
    version = _version(str(declared)) if text(declared) or isinstance(declared, int | float) else None
    floor = _version(cfg.lowest_min_cuda_version) or ()
    if version is not None and version >= floor:
        return
    said = "declares no min_cuda_version" if version is None else f"declares min_cuda_version {declared}"
    report(
        f"pod '{args.name}' {said}; it must be at least {cfg.lowest_min_cuda_version}. Without it RunPod "
        "may place the pod on a host whose driver is older than the image's CUDA, and the pod hangs. "
        "Set min_cuda_version (e.g. '12.4').",
        None,
    )


SAME_DATA_CENTER = StackValidationPolicy(
    name="volume-same-data-center",
    description="Network volumes and the pods or clusters mounting them share a data center.",
    validate=check_same_data_center,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(SameDataCenterConfig),
    remediation_steps="Pin the pod's data_center_ids (or cluster's data_center_id) to the volume's.",
)

ALLOWED_GPU_TYPES = ResourceValidationPolicy(
    name="allowed-gpu-types",
    description="Pods and clusters use a GPU type from `allowed_gpu_types`.",
    validate=check_allowed_gpu_types,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(GpuTypesConfig),
    remediation_steps="Pick an allowed GPU id or extend `allowed_gpu_types` in the policy config.",
)

NO_GLOBAL_NETWORKING_TRAINING = StackValidationPolicy(
    name="no-multi-node-over-global-networking",
    description="Multi-node training uses an Instant Cluster, not pods on 100 Mbps global networking.",
    validate=check_no_global_networking_training,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(GlobalNetworkingConfig),
    remediation_steps="Replace the pods with one runpod:InstantCluster.",
)

MIN_CUDA_VERSION = ResourceValidationPolicy(
    name="min-cuda-version",
    description="Pods declare min_cuda_version, at or above `lowest_min_cuda_version`.",
    validate=check_min_cuda_version,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(CudaConfig),
    remediation_steps="Set min_cuda_version on every pod (e.g. '12.4').",
)

POLICIES = (SAME_DATA_CENTER, ALLOWED_GPU_TYPES, NO_GLOBAL_NETWORKING_TRAINING, MIN_CUDA_VERSION)
