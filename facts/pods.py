"""Pod statuses, as RunPod's REST v2 spec enumerates them (`components.schemas.PodStatus`)."""

from __future__ import annotations

from enum import StrEnum


class PodStatus(StrEnum):
    """Lifecycle status of a pod; tests/facts/test_pods.py checks the members against the spec's enum."""

    PROVISIONING = "PROVISIONING"  # being allocated
    STARTING = "STARTING"  # container starting
    RUNNING = "RUNNING"  # container healthy (ready also needs `runtime` and the SSH port mapped)
    EXITED = "EXITED"  # container exited (stopped; a preempted spot pod ends here)
    ERROR = "ERROR"  # unrecoverable error
    TERMINATED = "TERMINATED"  # permanently deleted

    @property
    def is_terminal(self) -> bool:
        """The pod will not reach RUNNING by itself: stopped, failed or deleted."""
        return self in _TERMINAL

    @property
    def is_halted(self) -> bool:
        """Terminal but still on the account (it can be started again or must be terminated)."""
        return self in _HALTED


_HALTED = frozenset({PodStatus.EXITED, PodStatus.ERROR})
_TERMINAL = _HALTED | {PodStatus.TERMINATED}


def is_terminal(status: str) -> bool:
    """`PodStatus(status).is_terminal` for a raw API string; an undocumented status is not terminal."""
    try:
        return PodStatus(status).is_terminal
    except ValueError:
        return False


def is_halted(status: str) -> bool:
    """`PodStatus(status).is_halted` for a raw API string; an undocumented status is not halted."""
    try:
        return PodStatus(status).is_halted
    except ValueError:
        return False


# The ownership mark: every pod and cluster member trainstack creates carries this env var, its value
# `<project>/<stack>` (components/cluster.py writes it, ops/ownership.py reads it). RunPod has no tags but
# returns a pod's env with the pod.
OWNER_ENV = "TRAINSTACK_OWNER"
# The identity only the stack's own state holds (issue #62): a random id the provider's check writes into a
# pod's or cluster's env when it is first planned, kept from then on, so the state (the resource's inputs, or
# its pending create when an `up` was cut short) records it. A same-named stack of another backend, or anyone
# who copies the mark, cannot show one the stack's state holds (ops/ownership.py).
OWNER_ID_ENV = "TRAINSTACK_OWNER_ID"
