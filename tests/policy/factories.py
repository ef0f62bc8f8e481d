"""Hand-built policy arguments, as the engine builds them: props behind the unknown-checking proxy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.rules.common import BUCKET, CLUSTER, POD, VOLUME

UNKNOWN_STR = UNKNOWN_STRING_VALUE
UNKNOWN_NUM = UNKNOWN_NUMBER_VALUE


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def urn_of(resource_type: str, name: str) -> str:
    return f"urn:pulumi:test::trainstack::{resource_type}::{name}"


@dataclass
class Reports:
    """A report_violation that records what it was told."""

    calls: list[tuple[str, str | None]] = field(default_factory=list)

    def __call__(self, message: str, urn: str | None = None) -> None:
        self.calls.append((message, urn))

    @property
    def messages(self) -> list[str]:
        return [message for message, _ in self.calls]

    @property
    def text(self) -> str:
        return "\n".join(self.messages)


def resource_args(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None
) -> ResourceValidationArgs:
    proxied = unknown_checking_proxy(dict(props))
    return ResourceValidationArgs(
        resource_type, proxied, urn_of(resource_type, name), name, _opts(), None, config
    )


def stack_resource(
    resource_type: str,
    name: str,
    props: Mapping[str, Any],
    dependencies: Sequence[PolicyResource] = (),
    property_dependencies: Mapping[str, list[PolicyResource]] | None = None,
) -> PolicyResource:
    proxied = unknown_checking_proxy(dict(props))
    return PolicyResource(
        resource_type,
        proxied,
        urn_of(resource_type, name),
        name,
        _opts(),
        None,
        None,
        list(dependencies),
        dict(property_dependencies or {}),
    )


def run(policy: Policy, args: ResourceValidationArgs | StackValidationArgs) -> Reports:
    """Calls the real policy object's validate, as the engine does."""
    reports = Reports()
    if isinstance(policy, ResourceValidationPolicy):
        assert isinstance(args, ResourceValidationArgs)
        result = policy.validate(args, reports)
    else:
        assert isinstance(policy, StackValidationPolicy) and isinstance(args, StackValidationArgs)
        result = policy.validate(args, reports)
    assert result is None  # our policies are synchronous
    return reports


def check_resource(
    policy: Policy,
    resource_type: str,
    props: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    name: str = "trainer",
) -> Reports:
    return run(policy, resource_args(resource_type, name, props, config))


def check_stack(
    policy: Policy, resources: Sequence[PolicyResource], config: Mapping[str, Any] | None = None
) -> Reports:
    return run(policy, StackValidationArgs(list(resources), config))


def pod(**overrides: Any) -> dict[str, Any]:
    """A compliant on-demand H100 pod, as its provider's check() would emit it."""
    props: dict[str, Any] = {
        "name": "trainer",
        "image": "ghcr.io/example/train:1.0",
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "gpu_count": 8.0,
        "cloud": "SECURE",
        "data_center_ids": ["EU-RO-1"],
        "capacity": "on_demand",
        "env": {"HF_TOKEN": "{{ RUNPOD_SECRET_hf_token }}", "WANDB_PROJECT": "llm"},
        "ports": ["22/tcp"],
        "container_disk_gb": 50.0,
        "global_networking": False,
        "min_cuda_version": "12.4",
        "start_ssh": True,
        "cost_per_hour": 31.92,
        "storage_cost_per_month": 5.0,
        "training": {
            "checkpoint_bucket": "ckpt",
            "checkpoint_interval_s": 600.0,
            "max_run_hours": 10.0,
        },
    }
    props.update(overrides)
    return props


def cluster(**overrides: Any) -> dict[str, Any]:
    """A compliant 8 x 8 H100 Instant Cluster."""
    props: dict[str, Any] = {
        "name": "prod-cluster",
        "cluster_type": "TRAINING",
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "gpu_count_per_pod": 8.0,
        "pod_count": 8.0,
        "image": "ghcr.io/example/train:1.0",
        "env": {"WANDB_API_KEY": "{{ RUNPOD_SECRET_wandb }}"},
        "data_center_id": "EU-RO-1",
        "cost_per_hour": 255.36,
        "storage_cost_per_month": 0.0,
        "training": {"checkpoint_bucket": "ckpt", "checkpoint_interval_s": 900.0, "max_run_hours": 12.0},
    }
    props.update(overrides)
    return props


def volume(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "data",
        "size_gb": 1000.0,
        "data_center_id": "EU-RO-1",
        "volume_type": "STANDARD",
        "cost_per_hour": 0.0,
        "storage_cost_per_month": 70.0,
    }
    props.update(overrides)
    return props


def bucket(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "bucket_name": "ckpt",
        "region": "us-east-1",
        "versioning": True,
        "encryption": "aws:kms",
        "kms_key_id": "alias/ckpt",
        "block_public_access": True,
        "tls_only": True,
        "lifecycle": {
            "noncurrent_expire_days": 30.0,
            "archive_after_days": 90.0,
            "archive_storage_class": "GLACIER_IR",
            "abort_multipart_days": 7.0,
        },
    }
    props.update(overrides)
    return props


__all__ = [
    "BUCKET",
    "CLUSTER",
    "POD",
    "UNKNOWN_NUM",
    "UNKNOWN_STR",
    "VOLUME",
    "Reports",
    "bucket",
    "check_resource",
    "check_stack",
    "cluster",
    "pod",
    "resource_args",
    "stack_resource",
    "volume",
]
