"""Typed outputs of the RunPod resources as components read them back: `ClusterNode`, the cluster's node
record. Kept free of pydantic and httpx (like inputs.py) so the Pulumi program can import it at every preview;
the API records that load only inside provider verbs are in records.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ClusterNode:
    """One member of an Instant Cluster as the `nodes` output lists it (rank order); the provider writes it
    with `to_output` and components read it back with `from_output`. A member not yet placed or reachable
    has None in the fields RunPod has not reported."""

    rank: int | None  # 0 = primary
    pod_id: str
    ip: str | None  # fabric (cluster network) address
    ssh_host: str | None  # where `ssh -p <ssh_port> root@<ssh_host>` reaches the node
    ssh_port: int | None

    def to_output(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "pod_id": self.pod_id,
            "ip": self.ip,
            "ssh_host": self.ssh_host,
            "ssh_port": self.ssh_port,
        }

    @classmethod
    def from_output(cls, raw: Mapping[str, object]) -> ClusterNode:
        def num(key: str) -> int | None:
            value = raw.get(key)  # Pulumi hands numbers over as floats (3 -> 3.0)
            return None if value is None else int(float(str(value)))

        def text(key: str) -> str | None:
            value = raw.get(key)
            return None if value is None else str(value)

        return cls(
            rank=num("rank"),
            pod_id=str(raw["pod_id"]),
            ip=text("ip"),
            ssh_host=text("ssh_host"),
            ssh_port=num("ssh_port"),
        )
