"""Fold resource changes that differ only in their index into one row: "4 x search-pod-[0-3]". Pure.

A 64-GPU stack is 8 pods (or a cluster) plus their files and secrets; listing each pod's identical diff
makes the report unreadable. Changes are one group when the op, the type, the name with its trailing
number, and every changed property are the same once that name (e.g. `search-pod-2`) is written with the
index left out. Anything else that differs keeps them apart: folding never hides a real difference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from report.parse import PropertyChange, ResourceChange

_INDEXED = re.compile(r"^(?P<stem>.*?\D)(?P<index>\d+)$")
_PLACEHOLDER = "\x00index\x00"


@dataclass(frozen=True)
class ChangeGroup:
    """One row of the changes table: a single change, or several that differ only in their index."""

    first: ResourceChange  # the member with the lowest index; its op and type are the group's
    label: str  # "search-pod-[0-3]", or the one resource's name
    count: int
    changes: tuple[PropertyChange, ...]  # with the index written as in `label`


def index_range(indices: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> "[0-3,5]"."""
    spans: list[str] = []
    ordered = sorted(indices)
    start = prev = ordered[0]
    for i in [*ordered[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return "[" + ",".join(spans) + "]"


def _key(change: ResourceChange) -> tuple[object, ...] | None:
    match = _INDEXED.match(change.name)
    if match is None:
        return None
    token = change.name
    stem = match["stem"]

    def norm(text: str | None) -> str | None:
        return _relabel(text, token, _PLACEHOLDER)

    props = tuple((p.path, norm(p.before), norm(p.after), p.forces_replace) for p in change.changes)
    return (change.op, change.type, stem, props)


def _relabel(text: str | None, name: str, label: str) -> str | None:
    return None if text is None else re.sub(rf"{re.escape(name)}(?!\d)", lambda _: label, text)


def group_changes(changes: Sequence[ResourceChange]) -> list[ChangeGroup]:
    """Groups in the order of each group's first member in `changes`."""
    buckets: dict[object, list[ResourceChange]] = {}
    for n, change in enumerate(changes):
        key = _key(change)
        buckets.setdefault(key if key is not None else ("single", n), []).append(change)
    groups = []
    for members in buckets.values():
        if len(members) == 1:
            only = members[0]
            groups.append(ChangeGroup(only, only.name, 1, only.changes))
            continue
        indexed = sorted(members, key=lambda c: int(_INDEXED.match(c.name)["index"]))  # type: ignore[index]
        first = indexed[0]
        stem = _INDEXED.match(first.name)["stem"]  # type: ignore[index]
        label = stem + index_range([int(c.name[len(stem) :]) for c in indexed])
        props = tuple(
            PropertyChange(
                p.path,
                _relabel(p.before, first.name, label),
                _relabel(p.after, first.name, label),
                p.forces_replace,
            )
            for p in first.changes
        )
        groups.append(ChangeGroup(first, label, len(members), props))
    return groups
