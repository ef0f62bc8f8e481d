"""Policy-check program: declares trainstack's real provider resources from `policycheck:resources`.

The key is a list of `{kind, name, props}`; kind is Pod, InstantCluster, NetworkVolume, Secret or
CheckpointBucket, and props become that resource's typed inputs (a key the inputs lack is a test error).
A string prop `${other.attr}` anywhere in props becomes that earlier resource's output (e.g. `${data.id}`
for a volume id), so the engine sees a real dependency, as in the trainstack program.
"""

from __future__ import annotations

import re
from typing import Any

import pulumi

from providers.runpod.cluster import InstantCluster
from providers.runpod.inputs import (
    InstantClusterInputs,
    NetworkVolumeInputs,
    PodInputs,
    SecretInputs,
    TrainingInputs,
)
from providers.runpod.pod import Pod
from providers.runpod.secret import Secret
from providers.runpod.volume import NetworkVolume
from providers.s3.bucket import CheckpointBucket
from providers.s3.inputs import CheckpointBucketInputs, LifecycleInputs

KINDS: dict[str, tuple[Any, Any]] = {
    "Pod": (Pod, PodInputs),
    "InstantCluster": (InstantCluster, InstantClusterInputs),
    "NetworkVolume": (NetworkVolume, NetworkVolumeInputs),
    "Secret": (Secret, SecretInputs),
    "CheckpointBucket": (CheckpointBucket, CheckpointBucketInputs),
}
NESTED: dict[str, Any] = {"training": TrainingInputs, "lifecycle": LifecycleInputs}
REF = re.compile(r"^\$\{([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\}$")

declared: dict[str, pulumi.Resource] = {}


def resolve(value: Any) -> Any:
    if isinstance(value, str) and (m := REF.match(value)):
        return getattr(declared[m.group(1)], m.group(2))
    if isinstance(value, dict):
        return {k: resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v) for v in value]
    return value


def inputs(kind: Any, props: dict[str, Any]) -> Any:
    nested = {k: NESTED[k](**v) for k, v in props.items() if k in NESTED and isinstance(v, dict)}
    return kind(**{**props, **nested})


for spec in pulumi.Config().require_object("resources"):
    resource, kind = KINDS[spec["kind"]]
    declared[spec["name"]] = resource(spec["name"], inputs(kind, resolve(spec.get("props") or {})))

pulumi.export("declared", sorted(declared))
