"""The resource contract of docs/ARCHITECTURE.md as names every part reads: the type tokens, spelled once
here, and the cost keys each RunPod provider's check() adds (standard library only).

The records the H100Cluster component outputs (`nodes`, `billed_ids`, `forecast`) are typed in
`common/outputs.py`; the providers declare their resources with these tokens, and every reader compares
against them, so a renamed resource is one edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# What every RunPod provider's check() adds, so policies and the preview report can price a plan at preview.
COST_KEYS: Final = ("cost_per_hour", "storage_cost_per_month", "price_source")

# Pulumi names a dynamic resource `pulumi-python:dynamic/<module>:<name>` (pulumi.dynamic.Resource's
# `module=` and `name=` class keywords); the docs write it short, `<module>:<name>`.
DYNAMIC_PREFIX: Final = "pulumi-python:dynamic/"


@dataclass(frozen=True)
class TypeToken:
    """A dynamic resource's type: its provider declares `module` and `name`, readers compare `type`."""

    module: str
    name: str

    @property
    def type(self) -> str:
        """The full token Pulumi stores and the policy pack and preview see."""
        return f"{DYNAMIC_PREFIX}{self.module}:{self.name}"

    @property
    def short(self) -> str:
        """`runpod:Pod`: the token as docs/ARCHITECTURE.md and messages write it."""
        return f"{self.module}:{self.name}"


POD: Final = TypeToken("runpod", "Pod")
CLUSTER: Final = TypeToken("runpod", "InstantCluster")
VOLUME: Final = TypeToken("runpod", "NetworkVolume")
SECRET: Final = TypeToken("runpod", "Secret")
REGISTRY: Final = TypeToken("runpod", "RegistryAuth")
BUCKET: Final = TypeToken("s3", "CheckpointBucket")
NODE_FILES: Final = TypeToken("delivery", "NodeFiles")
SECRETS_FILE: Final = TypeToken("delivery", "SecretsFile")
RESOURCES: Final = (POD, CLUSTER, VOLUME, SECRET, REGISTRY, BUCKET, NODE_FILES, SECRETS_FILE)

# Where `delivery:SecretsFile` writes a node's secrets and its start script reads them: `<dir>/<pod id>.env`,
# on the container's own disk, outside the workspace and any network volume (docs/OPERATING.md, "Secrets").
SECRETS_DIR: Final = "/run/trainstack/secrets"

# The one component: a ComponentResource's token is its own, `<package>:<module>:<name>`.
COMPONENT_TYPE: Final = "trainstack:index:H100Cluster"


def short_type(token: str) -> str:
    """`pulumi-python:dynamic/runpod:Pod` -> `runpod:Pod`; any other token unchanged."""
    return token.removeprefix(DYNAMIC_PREFIX)
