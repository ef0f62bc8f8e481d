"""A bad host is not rented twice: each node's host identity from what the node itself can read, the hosts
that failed on this stack in its bucket, and the health gate's check against them.

RunPod's REST v2 names no machine, so a node knows its host by its GPUs: NVML's UUID of each GPU
(`GPU-<uuid>`, fixed in the board, the same whichever pod or container reads it). Two nodes that share a GPU
UUID ran on the same GPU, so on the same host. The failed hosts are objects of the stack's own bucket,
`hosts/failed/<first GPU UUID>.json` (`{"gpu_uuids", "pod", "reason", "at"}`), written by the node that saw
its host fail: its health gate failing on hardware (ECC, remaps, XID, PCIe, NVLink, throttle, temperature)
or its agent seeing an XID of the replace class (train/node/xid.py). Nothing here deletes one: a host
wrongly listed is let in again by deleting its object (the supervisor's run summary lists them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PREFIX = "hosts/failed/"


@dataclass(frozen=True)
class HostId:
    """The host as its GPUs say (sorted UUIDs); empty on a CPU node."""

    gpu_uuids: tuple[str, ...]

    @classmethod
    def of(cls, gpus: Iterable[Mapping[str, Any] | Any]) -> HostId:
        """From NVML readings (GpuReading or their JSON, as the health record keeps them)."""
        found = []
        for g in gpus:
            uuid = g.get("uuid") if isinstance(g, Mapping) else getattr(g, "uuid", None)
            if uuid:
                found.append(str(uuid))
        return cls(tuple(sorted(found)))

    @property
    def key(self) -> str | None:
        return f"{PREFIX}{self.gpu_uuids[0]}.json" if self.gpu_uuids else None


def failed_before(host: HostId, records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first failed-host record that shares a GPU with this host, or None."""
    mine = set(host.gpu_uuids)
    for rec in records:
        if mine & {str(u) for u in rec.get("gpu_uuids") or ()}:
            return rec
    return None


def refusal(host: HostId, rec: Mapping[str, Any], action: str) -> str:
    """The gate's line for a host that failed before on this stack."""
    shared = sorted(set(host.gpu_uuids) & {str(u) for u in rec.get("gpu_uuids") or ()})
    before = f"pod {rec.get('pod') or '?'}: {rec.get('reason') or '?'}"
    return f"node: this host failed before on this stack ({before}; GPU {shared[0]}); {action} elsewhere"


def read_failed(s3: Any, bucket: str) -> list[dict[str, Any]]:
    """Every failed-host record in the bucket (a record that does not parse is skipped)."""
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=PREFIX)
    for page in pages:
        for obj in page.get("Contents", []):
            try:
                body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                rec = json.loads(body)
            except (ValueError, KeyError):
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def mark_failed(s3: Any, bucket: str, host: HostId, pod: str, reason: str) -> str | None:
    """Record this host as failed (its key, or None on a CPU node, which has no identity to keep)."""
    if host.key is None:
        return None
    body = {"gpu_uuids": list(host.gpu_uuids), "pod": pod, "reason": reason[:300], "at": time.time()}
    s3.put_object(Bucket=bucket, Key=host.key, Body=json.dumps(body).encode())
    return host.key


def client() -> Any:
    """The node's S3 client, as train/node/transfer.py makes it."""
    import os

    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)
