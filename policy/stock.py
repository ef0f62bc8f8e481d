"""The capacity line, pure: "8 x 8 H100 SXM: none free in EU-RO-1, LOW in US-TX-3", from the `availability`
property pods and clusters carry at preview (providers/runpod/capacity.py). Shared by the policy
`capacity-available` and the pull-request report, so both say the same; no pulumi_policy import."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from facts.gpus import GPUS

LEVELS: Final = ("NONE", "LOW", "MEDIUM", "HIGH")  # RunPod's AvailabilityLevel, scarcest first
TIMES: Final = "\u00d7"  # the multiplication sign of "8 x 8 H100 SXM", as the report's groups write it


def gpu_label(api_id: Any) -> str:
    """`H100 SXM` for `NVIDIA H100 80GB HBM3`: the stack config's name of the GPU type, else the id."""
    for key, spec in GPUS.items():
        if spec.api_id == api_id:
            return key.replace("_", " ")
    return str(api_id)


def rows(capacity: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(data center, level or None when unread) in the stack's order; malformed rows are skipped."""
    out: list[tuple[str, str | None]] = []
    for row in capacity.get("data_centers") or []:
        if isinstance(row, Mapping) and isinstance(row.get("id"), str):
            level = row.get("availability")
            out.append((row["id"], level if level in LEVELS else None))
    return out


def shape(capacity: Mapping[str, Any], nodes: int | None = None) -> str:
    """`8 x 8 H100 SXM`: nodes (pods of a pool, or a cluster's nodes) x GPUs per node."""
    count = nodes if nodes is not None else capacity.get("nodes")
    return f"{count} {TIMES} {capacity.get('gpu_count')} {gpu_label(capacity.get('gpu_type_id'))}"


def describe(capacity: Mapping[str, Any], nodes: int | None = None) -> str:
    """One line: levels grouped as the data centers come ("none free in A, LOW in B, HIGH in C"), and
    where the stack is committed when a volume chose it; or that the catalog could not be read."""
    head = shape(capacity, nodes)
    if not capacity.get("read"):
        why = capacity.get("error") or "no answer"
        return f"{head}: capacity could not be read ({why}); advisory only, nothing is blocked"
    found = rows(capacity)
    if not found:
        return f"{head}: none free in any data center RunPod lists for it"
    parts: list[str] = []
    for dc, level in found:
        said = "none free" if level == "NONE" else (level or "unknown")
        if parts and parts[-1].startswith(f"{said} in "):
            parts[-1] += f", {dc}"
        else:
            parts.append(f"{said} in {dc}")
    chosen = capacity.get("chosen")
    pinned = f" (placed in {chosen})" if isinstance(chosen, str) and chosen and len(found) > 1 else ""
    return f"{head}: {', '.join(parts)}{pinned}"


def short_of(capacity: Mapping[str, Any], floor: str = "LOW") -> list[str]:
    """The data centers reading below `floor` (NONE below LOW); unread rows are not counted."""
    bar = LEVELS.index(floor) if floor in LEVELS else 1
    return [dc for dc, level in rows(capacity) if level is not None and LEVELS.index(level) < bar]


def group(resources: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[Mapping[str, Any], int]]:
    """One (capacity, nodes) per distinct shape: a cluster counts its own nodes, pods count themselves."""
    seen: dict[str, tuple[Mapping[str, Any], int]] = {}
    for kind, cap in resources:
        key = repr((kind, cap.get("gpu_type_id"), cap.get("gpu_count"), rows(cap), cap.get("error")))
        if kind == "pod":
            prior = seen.get(key)
            seen[key] = (cap, (prior[1] if prior else 0) + 1)
        else:
            seen[key] = (cap, int(cap.get("nodes") or 1))
    return list(seen.values())
