"""The report's capacity line per stack, beside "cheapest feasible": from the pods' and clusters'
`availability` inputs in the preview's steps, as the policy `capacity-available` words it."""

from __future__ import annotations

import json
from typing import Any

from policy.stock import TIMES
from report.parse import parse_events
from report.render import build, render_markdown, to_json

CLUSTER_TYPE = "pulumi-python:dynamic/runpod:InstantCluster"
POD_TYPE = "pulumi-python:dynamic/runpod:Pod"


def _stock(nodes: int, *levels: tuple[str, str]) -> dict[str, Any]:
    return {
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "gpu_count": 8,
        "nodes": nodes,
        "product": "CLUSTER",
        "read": True,
        "error": None,
        "data_centers": [{"id": dc, "availability": lvl} for dc, lvl in levels],
        "chosen": None,
    }


def _event(type_: str, name: str, availability: dict[str, Any], op: str = "create") -> str:
    inputs = {"cost_per_hour": 1.0, "storage_cost_per_month": 0.0, "availability": availability}
    urn = f"urn:pulumi:prod::trainstack::{type_}::{name}"
    new = {"type": type_, "custom": True, "inputs": inputs}
    return json.dumps({"resourcePreEvent": {"metadata": {"op": op, "urn": urn, "type": type_, "new": new}}})


def _report(*events: str) -> Any:
    preview = parse_events([*events, json.dumps({"summaryEvent": {"result": "succeeded"}})])
    return build("prod", preview, [])


def test_the_report_shows_the_capacity_line_of_each_shape() -> None:
    report = _report(_event(CLUSTER_TYPE, "prod-cluster", _stock(8, ("EU-RO-1", "NONE"), ("US-TX-3", "LOW"))))
    text = render_markdown([report])
    assert f"capacity now: 8 {TIMES} 8 H100 SXM: none free in EU-RO-1, LOW in US-TX-3" in text
    data = to_json([report])["stacks"][0]
    assert data["capacity"] == [f"capacity now: 8 {TIMES} 8 H100 SXM: none free in EU-RO-1, LOW in US-TX-3"]
    assert all("availability" not in change for change in data["changes"])


def test_pods_sum_and_a_deleted_resource_shows_none() -> None:
    row = {**_stock(1, ("US-TX-3", "HIGH")), "product": "POD"}
    pods = [_event(POD_TYPE, f"search-pod-{i}", row) for i in range(3)]
    gone = _event(CLUSTER_TYPE, "old-cluster", _stock(2, ("EU-RO-1", "NONE")), op="delete")
    text = render_markdown([_report(*pods, gone)])
    assert f"capacity now: 3 {TIMES} 8 H100 SXM: HIGH in US-TX-3" in text
    assert "EU-RO-1" not in text
