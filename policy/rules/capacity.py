"""Capacity mix policies: how much runs on spot, and what spot must never carry."""

from __future__ import annotations

from dataclasses import dataclass

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pydantic import Field

from policy.rules.common import (
    CLUSTER,
    COMPUTE_TYPES,
    POD,
    PREEMPTIBLE,
    PolicyConfig,
    Resource,
    Unknown,
    capacity,
    config_schema,
    gpu_total,
    job_nodes,
    listing,
    load_config,
    number,
    of_types,
    read,
    text,
)

# RunPod's historical spot behaviour (docs.runpod.io/pods/pricing, spot, before 2026-05-06): SIGTERM, 5 s,
# SIGKILL; the container disk is lost.
_PREEMPTION_NOTE = (
    "RunPod gives a spot pod 5 seconds' notice (SIGTERM, then SIGKILL) and drops its container disk, "
    "so only checkpoints already written on a timer survive"
)


class SpotShareConfig(PolicyConfig):
    max_spot_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Largest share (0-1) of the stack's GPUs, and of its GPU-hours, on spot capacity.",
    )
    count_auto_as_spot: bool = Field(
        True,
        description="Count `capacity: auto` pods as spot (they try spot first), the worst case.",
    )


@dataclass
class _Tally:
    """Spot against total, for one unit (GPUs or GPU-hours)."""

    unit: str
    spot: float = 0.0
    total: float = 0.0


def _on_spot(resource: Resource, count_auto: bool) -> bool | None:
    if resource.resource_type == CLUSTER:
        return False  # Instant Clusters are on-demand only; multi-node-on-demand flags any attempt.
    mode = capacity(resource.props)
    if isinstance(mode, Unknown):
        return None
    return mode == "spot" or (mode == "auto" and count_auto)


def _report_share(
    report: ReportViolation, tally: _Tally, spot_names: list[str], cfg: SpotShareConfig
) -> None:
    if tally.total <= 0:
        return
    share = tally.spot / tally.total
    if share <= cfg.max_spot_share + 1e-9:
        return
    report(
        f"spot capacity holds {tally.spot:g} of {tally.total:g} {tally.unit} ({share:.0%}), over the "
        f"configured maximum of {cfg.max_spot_share:.0%} (on spot: {listing(spot_names)}). "
        f"{_PREEMPTION_NOTE}, and RunPod has been withdrawing spot. Move some of these pods to "
        "`capacity: on_demand`, or raise `max_spot_share` in the policy config.",
        None,
    )


def check_spot_share(args: StackValidationArgs, report: ReportViolation) -> None:
    """The share of GPUs, and of GPU-hours over training.max_run_hours, on spot stays under a maximum."""
    cfg = load_config(SpotShareConfig, args.get_config(), report)
    if cfg is None:
        return
    gpus, gpu_hours = _Tally("GPUs"), _Tally("GPU-hours")
    hours_known = True
    spot_names: list[str] = []
    for res in of_types(args.resources, *COMPUTE_TYPES):
        count, on_spot = gpu_total(res), _on_spot(res, cfg.count_auto_as_spot)
        if count is None or on_spot is None:
            continue  # unknown at preview: counted when `pulumi up` runs the policy again
        hours = number(read(res.props, "training", "max_run_hours"))
        gpus.total += count
        if on_spot:
            gpus.spot += count
            spot_names.append(f"{res.name} ({count:g} GPUs)")
        if hours is None:
            hours_known = False
            continue
        gpu_hours.total += count * hours
        gpu_hours.spot += count * hours if on_spot else 0.0
    _report_share(report, gpus, spot_names, cfg)
    if hours_known:
        _report_share(report, gpu_hours, spot_names, cfg)


class MultiNodeConfig(PolicyConfig):
    nodes_env_key: str = Field(
        "NUM_NODES",
        description="Env key that says how many nodes a pod's training job spans (RunPod's own name).",
    )


def _cluster_spot_attempt(args: ResourceValidationArgs) -> list[str]:
    tried: list[str] = []
    mode = text(read(args.props, "capacity"))
    if mode is not None and mode.strip().lower() in PREEMPTIBLE:
        tried.append(f"capacity '{mode}'")
    if number(read(args.props, "bid_per_gpu")) is not None:
        tried.append("bid_per_gpu")
    return tried


def check_multi_node_on_demand(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Multi-node training (Instant Clusters, pods of one multi-node job) never runs on spot."""
    cfg = load_config(MultiNodeConfig, args.get_config(), report)
    if cfg is None:
        return
    if args.resource_type == CLUSTER:
        tried = _cluster_spot_attempt(args)
        if tried:
            report(
                f"cluster '{args.name}' sets {' and '.join(tried)}, but RunPod Instant Clusters have no "
                "spot capacity: they are on-demand only. Remove `capacity` and `bid_per_gpu` from it.",
                None,
            )
        return
    if args.resource_type != POD:
        return
    nodes, mode = job_nodes(args.props, cfg.nodes_env_key), capacity(args.props)
    if nodes is None or nodes <= 1 or isinstance(mode, Unknown) or mode not in PREEMPTIBLE:
        return
    report(
        f"pod '{args.name}' is one node of a {nodes:g}-node training job ({cfg.nodes_env_key}={nodes:g}) "
        f"but asks for capacity '{mode}': one preempted node stalls every other node's collectives, "
        "so the whole job pays for idle GPUs. Use `capacity: on_demand`, or better a runpod:InstantCluster "
        "(on-demand, one data center, 3200 Gbps fabric).",
        None,
    )


class SpotCheckpointConfig(PolicyConfig):
    max_checkpoint_interval_s: float = Field(
        900,
        gt=0,
        description="Longest training.checkpoint_interval_s allowed on spot or auto pods, in seconds.",
    )


def check_spot_checkpointing(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A spot or auto pod writes timed checkpoints to a bucket often enough to survive preemption."""
    if args.resource_type != POD:
        return
    cfg = load_config(SpotCheckpointConfig, args.get_config(), report)
    mode = capacity(args.props)
    if cfg is None or isinstance(mode, Unknown) or mode not in PREEMPTIBLE:
        return
    bucket = read(args.props, "training", "checkpoint_bucket")
    if not isinstance(bucket, Unknown) and text(bucket) is None:
        report(
            f"pod '{args.name}' runs on capacity '{mode}' but sets no training.checkpoint_bucket. "
            f"{_PREEMPTION_NOTE}. Set training.checkpoint_bucket to an s3:CheckpointBucket, "
            "or use `capacity: on_demand`.",
            None,
        )
    raw_interval = read(args.props, "training", "checkpoint_interval_s")
    if isinstance(raw_interval, Unknown):
        return
    interval, limit = number(raw_interval), cfg.max_checkpoint_interval_s
    if interval is None or interval <= 0 or interval > limit:
        said = (
            "sets no training.checkpoint_interval_s"
            if interval is None
            else f"checkpoints every {interval:g} s"
        )
        report(
            f"pod '{args.name}' runs on capacity '{mode}' and {said}; the maximum is {limit:g} s. "
            f"{_PREEMPTION_NOTE}: a 5-second notice is too short to save one, so a preemption loses "
            f"everything since the last timed checkpoint. Set training.checkpoint_interval_s to at most "
            f"{limit:g}, or raise `max_checkpoint_interval_s` in the policy config.",
            None,
        )


_SPOT_REMEDIATION = "Move pods to `capacity: on_demand` or raise `max_spot_share` in the policy config."

SPOT_SHARE = StackValidationPolicy(
    name="spot-share-limit",
    description="The share of GPUs and GPU-hours on spot capacity stays under `max_spot_share`.",
    validate=check_spot_share,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(SpotShareConfig),
    remediation_steps=_SPOT_REMEDIATION,
)

MULTI_NODE_ON_DEMAND = ResourceValidationPolicy(
    name="multi-node-on-demand",
    description="Instant Clusters and pods of a multi-node training job run on on-demand capacity.",
    validate=check_multi_node_on_demand,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(MultiNodeConfig),
    remediation_steps="Remove `capacity`/`bid_per_gpu` from clusters; set multi-node pods to on_demand.",
)

SPOT_CHECKPOINTING = ResourceValidationPolicy(
    name="spot-checkpointing",
    description="Spot and auto pods checkpoint to a bucket on a timer no longer than the configured maximum.",
    validate=check_spot_checkpointing,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(SpotCheckpointConfig),
    remediation_steps="Set training.checkpoint_bucket and a short training.checkpoint_interval_s.",
)

POLICIES = (SPOT_SHARE, MULTI_NODE_ON_DEMAND, SPOT_CHECKPOINTING)
