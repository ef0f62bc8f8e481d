"""The live view at 80 columns (issue #68: pod "e19a…", alert "nvme…"): every pod id and alert name whole,
no line over the width, and the money in dollars on both sides ("$31.93/h" beside "1.31 USD" was)."""

from __future__ import annotations

import copy

from rich.console import Console

from tests.watch.test_watch import STATE, _snap
from watch.render import render

PODS = ("e19a0b2c3d4f5e", "f29a0b2c3d4f5e")


def test_at_80_columns_nothing_is_cut() -> None:
    state = copy.deepcopy(STATE)
    state["firing"].append(
        {"rule": "nvme_latency_high", "severity": "warning", "node": "rank-0 (10.0.0.2)", "summary": "slow"}
    )
    outputs = {
        "nodes": [
            {"rank": i, "ip": f"10.1.0.{i + 2}", "pod_id": pod, "ssh_endpoint": f"127.0.0.1:{2201 + i}"}
            for i, pod in enumerate(PODS)
        ],
        "cost_per_hour": 63.84,
        "cluster_id": "cl-1",
    }
    console = Console(record=True, width=80)
    console.print(render(_snap(outputs=outputs, aggregator=state)))
    text = console.export_text()
    table = text.split("rank 1 (")[0]
    assert "…" not in table, table
    for whole in (*PODS, "nvme_latency_high", "UNREACHABLE", "310.0"):
        assert whole in table, (whole, table)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "spent $18.12" in text and " USD" not in text
