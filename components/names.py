"""Every RunPod name the stack owns, shaped here only: what H100Cluster calls its resources, whether a live
name is one a stack gives (ops/orphans.py) and which stack a name belongs to (ops/local_account.py).

RunPod names are account-wide and carry no tags, so a name is how trainstack knows its own: every one is
`trainstack-<stack>-<what>`. Standard library only: the operator tools read these without the component.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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
