"""Every RunPod name the stack owns, shaped here only: what H100Cluster calls its resources, whether a live
name is one a stack gives (ops/orphans.py) and which stack a name belongs to (ops/local_account.py).

RunPod names are account-wide and carry no tags, so a name is how trainstack knows its own: every one is
`trainstack-<stack>-<what>`. Standard library only: the operator tools read these without the component.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from facts import pods

if TYPE_CHECKING:
    from stackconfig.config import StackConfig

PREFIX = "trainstack"
# The <what> of each kind, as regular expressions; the builders below write exactly these shapes.
_SHAPES = {
    "cluster": r"cluster",
    "pod": r"pod-\d+",
    "volume": r"volume",
    "secret": r"[a-z][a-z0-9_]*",  # secret_name of an env var name: lower case, never a "-"
}
# A name RunPod gives on its own starts with one of ours: an Instant Cluster's members are <cluster>-<rank>.
_OWNER = re.compile(
    rf"^{PREFIX}-(?P<stack>.+?)-(?:{_SHAPES['pod']}|{_SHAPES['cluster']}|{_SHAPES['volume']})(?:\b.*)?$"
)


def cluster_name(stack: str) -> str:
    return f"{PREFIX}-{stack}-cluster"


def pod_name(stack: str, index: int) -> str:
    """Pod `index` of the pool: unique, so the provider reconciles a lost create by its name."""
    return f"{PREFIX}-{stack}-pod-{index}"


def volume_name(stack: str) -> str:
    return f"{PREFIX}-{stack}-volume"


def secret_name(stack: str, env_name: str) -> str:
    """RunPod secret names are account-wide: prefix them so stacks never collide."""
    return f"{PREFIX}-{stack}-{env_name.lower()}"


def secret_description(stack: str, env_name: str) -> str:
    """What the stack writes as each secret's description: the secret's ownership mark."""
    return f"trainstack stack {stack}: {env_name}"


# The ownership mark: every pod and cluster member the stack creates carries this env var, its value
# `owner_mark(project, stack)`. RunPod has no tags, but it returns a pod's env with the pod, so a resource
# made by anyone else through the API (who did not copy our env) is never taken for ours (ops/ownership.py).
OWNER_ENV = pods.OWNER_ENV  # facts/pods.py: the one spelling, which the providers read too


def owner_mark(project: str, stack: str) -> str:
    """The value of OWNER_ENV on the stack's pods and cluster members."""
    return f"{project}/{stack}"


def registry_name(stack: str, name: str) -> str:
    """The registry credential `cluster.registry_auth.name`, under the stack's prefix."""
    return f"{PREFIX}-{stack}-{name}"


def owned_names(stack: str) -> dict[str, Callable[[str], bool]]:
    """Per RunPod kind, whether a name is one this stack gives. Exact shapes, so stack `dev` never claims
    `dev-2`'s `trainstack-dev-2-pod-0`."""
    prefix = re.escape(f"{PREFIX}-{stack}-")
    return {kind: _matcher(re.compile(prefix + shape)) for kind, shape in _SHAPES.items()}


def _matcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda name: pattern.fullmatch(name) is not None


def owner(name: str) -> str | None:
    """The stack a pod, cluster (or cluster member) or volume name belongs to; None for a name trainstack
    did not give."""
    match = _OWNER.match(name)
    return match["stack"] if match else None


@dataclass(frozen=True)
class DeclaredResources:
    """The RunPod resources one stack's config declares, by kind, exactly named, with the marks it writes.

    The input of the ownership rule (`ops.ownership.is_ours`): built from the config alone, so a resource
    the config does not declare (a 100th pod, a cluster on a pods stack) is never the stack's."""

    stack: str
    mark: str  # OWNER_ENV's value on every pod and cluster member
    pods: frozenset[str]
    cluster: str | None
    volume: str | None
    secrets: Mapping[str, str]  # secret name -> the description the stack writes on it


def declared_resources(stack: str, cfg: StackConfig, project: str) -> DeclaredResources:
    """What `H100Cluster(stack, ...)` declares at RunPod for `cfg` (the same names as the component)."""
    c = cfg.cluster
    pods = frozenset(pod_name(stack, i) for i in range(c.nodes)) if c.topology != "cluster" else frozenset()
    return DeclaredResources(
        stack=stack,
        mark=owner_mark(project, stack),
        pods=pods,
        cluster=cluster_name(stack) if c.topology == "cluster" else None,
        volume=volume_name(stack) if c.volume_gb else None,
        secrets={secret_name(stack, e): secret_description(stack, e) for e in cfg.training.secrets},
    )
