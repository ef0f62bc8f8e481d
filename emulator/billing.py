"""Billing on the emulator's clock: a meter of rate segments per resource, and the v2 billing views of it.

Every save or delete of a pod or network volume (World.save/forget, the one write path) closes the
resource's open segments whose rate changed and opens new ones, so a pod stopped for an hour bills no GPU
for that hour and a grown volume bills its new size from then on. Cluster members meter under their
cluster (GET /v2/billing/clusters), loose pods under GET /v2/billing/pods. Queries cut the segments into
the spec's time buckets (hour, day, week, month, year; UTC, weeks from Monday).

Rates: GPU price x count while the pod is not stopped; container disk and persistent mount at the
container-disk rate while it runs; a stopped pod bills its persistent mount (volume disk) alone, at the
stopped rate, as RunPod does (its container disk is wiped at the stop); network volumes at the tiered
volume rate (facts/money.py); all per GB-month spread over 730 h. RunPod does not publish a networking
charge for clusters: `networkingAmount` is 0.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from emulator.models import PodRecord, VolumeRecord
from emulator.problems import ApiError
from facts.money import HOURS_PER_MONTH, SNAPSHOT

BUCKETS = ("hour", "day", "week", "month", "year")
DEFAULT_WINDOW_S = 30 * 86400  # startTime "Defaults to 30 days ago"


@dataclass
class Segment:
    """`rate` USD/h of one cost component of one resource, from `start` until `end` (None: still open)."""

    family: str  # "pod", "cluster" or "volume": which billing endpoint shows it
    owner: str  # the billed id: pod id, cluster id or volume id
    resource: str  # the metered record (a member pod meters under its cluster)
    component: str  # the amount field it adds to, e.g. "gpuAmount"
    rate: float
    start: float
    end: float | None = None
    seq: int = 0  # its row in the store (kind "meter")


def rates(record: PodRecord | VolumeRecord) -> dict[str, float]:
    """USD per hour by amount field, for the record as it is now."""
    if isinstance(record, VolumeRecord):
        field = "highPerformanceAmount" if record.type == "HIGH_PERFORMANCE" else "standardAmount"
        return {field: SNAPSHOT.volume_monthly(record.size) / HOURS_PER_MONTH}
    volume_gb = int((record.persistent or {}).get("size", 0))
    if record.halted:
        return {"gpuAmount": 0.0, "diskAmount": SNAPSHOT.stopped_disk_monthly(volume_gb) / HOURS_PER_MONTH}
    disk = SNAPSHOT.container_disk_monthly(record.disk + volume_gb) / HOURS_PER_MONTH
    return {"gpuAmount": record.hourly_cost, "diskAmount": disk}


def family_of(record: PodRecord | VolumeRecord) -> tuple[str, str]:
    if isinstance(record, VolumeRecord):
        return "volume", record.id
    return ("cluster", record.cluster_id) if record.cluster_id else ("pod", record.id)


def meter(
    segments: list[Segment], record: PodRecord | VolumeRecord | None, ident: str, now: float
) -> tuple[list[Segment], list[Segment]]:
    """For `ident` as it is now (`record`; None once deleted): the open segments to close because their
    rate changed, and the segments to open. Closing sets `end`; the caller stores both lists."""
    wanted = rates(record) if record is not None else {}
    open_now = {s.component: s for s in segments if s.resource == ident and s.end is None}
    closed = [seg for comp, seg in open_now.items() if not math.isclose(wanted.get(comp, -1.0), seg.rate)]
    for segment in closed:
        segment.end = now
    opened = []
    if record is not None:
        family, owner = family_of(record)
        for component, rate in wanted.items():
            current = open_now.get(component)
            if current is None or current.end is not None:
                opened.append(Segment(family, owner, ident, component, rate, now))
    return closed, opened


# -- queries -----------------------------------------------------------------------------------------


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def bucket_start(ts: float, size: str) -> float:
    d = _dt(ts)
    if size == "hour":
        d = d.replace(minute=0, second=0, microsecond=0)
    elif size == "day":
        d = d.replace(hour=0, minute=0, second=0, microsecond=0)
    elif size == "week":
        d = (d - timedelta(days=d.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    elif size == "month":
        d = d.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        d = d.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    return d.timestamp()


def next_bucket(start: float, size: str) -> float:
    d = _dt(start)
    if size in ("hour", "day", "week"):
        return start + {"hour": 3600, "day": 86400, "week": 7 * 86400}[size]
    if size == "month":
        days = calendar.monthrange(d.year, d.month)[1]
        return start + days * 86400
    return d.replace(year=d.year + 1).timestamp()


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)
# Bucket arithmetic stays inside years Python's datetime can step through either way.
_EARLIEST, _LATEST = (
    datetime(1970, 1, 1, tzinfo=UTC).timestamp(),
    datetime(9000, 1, 1, tzinfo=UTC).timestamp(),
)


def parse_time(name: str, text: str) -> float:
    """An RFC 3339 date-time (a leap second reads as :59), clamped to 1970-9000."""
    match = _RFC3339.match(text)
    if match is None:
        raise ApiError(422, f"{name} is not an RFC 3339 date-time", errors=[f"query {name}: {text!r}"])
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        when = datetime(
            int(year), int(month), int(day), int(hour), int(minute), min(int(second), 59), tzinfo=UTC
        )
    except ValueError:
        raise ApiError(
            422, f"{name} is not a calendar date-time", errors=[f"query {name}: {text!r}"]
        ) from None
    offset = (
        0 if zone in ("Z", "z") else (int(zone[1:3]) * 60 + int(zone[4:6])) * (1 if zone[0] == "+" else -1)
    )
    stamp = when.timestamp() - offset * 60 + float(f"0.{fraction or 0}")
    return min(max(stamp, _EARLIEST), _LATEST)


def _back(start: float, size: str, buckets: int) -> float:
    """The start of the bucket `buckets` before the one starting at `start`, never before 1970."""
    if size in ("hour", "day", "week"):
        step = {"hour": 3600, "day": 86400, "week": 7 * 86400}[size]
        return max(start - buckets * step, _EARLIEST)
    d = _dt(start)
    months = d.year * 12 + d.month - 1 - (buckets if size == "month" else 12 * buckets)
    year, month = divmod(max(months, 1970 * 12), 12)
    return datetime(year, month + 1, 1, tzinfo=UTC).timestamp()


def resolve_window(query: dict[str, Any], now: float) -> tuple[float, float, str]:
    """[start, end) snapped to bucket boundaries, as the startTime/endTime/lastN descriptions say."""
    size = query.get("bucketSize", "day")
    if "lastN" in query:
        if "startTime" in query or "endTime" in query:
            raise ApiError(400, "lastN is mutually exclusive with startTime/endTime; send one or the other.")
        current = bucket_start(now, size)
        return _back(current, size, int(query["lastN"]) - 1), next_bucket(current, size), size
    end = parse_time("endTime", query["endTime"]) if "endTime" in query else now
    start = parse_time("startTime", query["startTime"]) if "startTime" in query else now - DEFAULT_WINDOW_S
    start = bucket_start(start, size)
    snapped = bucket_start(end, size)
    end = end if snapped == end else next_bucket(snapped, size)
    return start, max(start, end), size  # an end before the start is an empty window, not an error


def records(
    segments: list[Segment], family: str, owner: str | None, window: tuple[float, float, str], now: float
) -> list[dict[str, Any]]:
    """One record per billed resource per bucket it existed in, amounts in USD."""
    start, end, size = window
    found: dict[tuple[float, str], dict[str, float]] = {}
    for segment in segments:
        if segment.family != family or (owner is not None and segment.owner != owner):
            continue
        seg_end = now if segment.end is None else segment.end
        lo, hi = max(segment.start, start), min(seg_end, end)
        if hi < lo or (hi == lo and segment.end is not None):
            continue
        bucket = bucket_start(lo, size)
        while True:
            stop = next_bucket(bucket, size)
            overlap = max(0.0, min(hi, stop) - max(lo, bucket))
            amounts = found.setdefault((bucket, segment.owner), {})
            amounts[segment.component] = amounts.get(segment.component, 0.0) + segment.rate * overlap / 3600
            if stop >= hi:
                break
            bucket = stop
    out = []
    for (bucket, ident), amounts in sorted(found.items()):
        out.append(
            {"startTime": _iso(bucket), "endTime": _iso(next_bucket(bucket, size)), "owner": ident} | amounts
        )
    return out


def _iso(ts: float) -> str:
    return _dt(ts).isoformat().replace("+00:00", "Z")


# Each family's amount fields and id field, as ListPodBilling/ListClusterBilling/ListNetworkVolumeBilling.
FAMILIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "pod": ("podId", ("gpuAmount", "cpuAmount", "diskAmount"), "uniquePodCount"),
    "cluster": ("clusterId", ("gpuAmount", "diskAmount", "networkingAmount"), "uniqueClusterCount"),
    "volume": ("networkVolumeId", ("standardAmount", "highPerformanceAmount"), "uniqueNetworkVolumeCount"),
}


def response(segments: list[Segment], family: str, query: dict[str, Any], now: float) -> dict[str, Any]:
    """The whole List*BillingResponse: records, and metadata echoing the resolved query and totals."""
    id_field, fields, unique_field = FAMILIES[family]
    window = resolve_window(query, now)
    owner = query.get(id_field)
    rows = []
    totals = dict.fromkeys(fields, 0.0)
    for raw in records(segments, family, owner, window, now):
        amounts = {f: round(raw.get(f, 0.0), 6) for f in fields}
        for f in fields:
            totals[f] += amounts[f]
        rows.append(
            {"startTime": raw["startTime"], "endTime": raw["endTime"], id_field: raw["owner"]}
            | amounts
            | {"totalAmount": round(sum(amounts.values()), 6)}
        )
    echo = {
        "startTime": _iso(window[0]),
        "endTime": _iso(window[1]),
        "bucketSize": window[2],
        id_field: owner,
    }
    metadata = {
        "query": echo,
        "recordCount": len(rows),
        unique_field: len({r[id_field] for r in rows}),
        "totals": {f: round(v, 6) for f, v in totals.items()}
        | {"totalAmount": round(sum(totals.values()), 6)},
    }
    return {"records": rows, "metadata": metadata}
