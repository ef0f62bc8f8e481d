"""The hosts that failed in a run, listed in its release and summary messages for a support ticket
(issue #66): read from the bucket's `hosts/failed/` (train/node/hostid.py writes them).
No I/O: a fake bucket."""

from __future__ import annotations

import io
import json
from typing import Any

from supervisor.act import failed_hosts_note, summary_text
from supervisor.model import Decision, Observation, RoundRecord
from supervisor.observe import failed_hosts

T0 = 1_800_000_000.0


class Bucket:
    """hostid.read_failed's calls (a paginator, get_object) over a dict; `broken` raises on listing."""

    def __init__(self, objects: dict[str, Any], broken: bool = False) -> None:
        self.objects = {k: json.dumps(v).encode() for k, v in objects.items()}
        self.broken = broken

    def get_paginator(self, _name: str) -> Bucket:
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
        if self.broken:
            raise ConnectionError("endpoint unreachable")
        return [{"Contents": [{"Key": k} for k in sorted(self.objects) if k.startswith(Prefix)]}]

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[Key])}


def test_the_hosts_that_failed_this_run_are_read_older_runs_left_out() -> None:
    bucket = Bucket(
        {
            "hosts/failed/GPU-a.json": {
                "gpu_uuids": ["GPU-a", "GPU-b"],
                "pod": "p1",
                "reason": "XID 79",
                "at": T0,
            },
            "hosts/failed/GPU-c.json": {
                "gpu_uuids": ["GPU-c"],
                "pod": "p9",
                "reason": "ECC",
                "at": T0 - 86400,
            },
        }
    )
    problems: list[str] = []
    assert failed_hosts(bucket, "bkt", T0 - 3600, problems) == ("GPU-a, GPU-b (pod p1: XID 79)",)
    assert problems == []


def test_a_bucket_that_cannot_be_read_is_a_problem_line_never_a_crash() -> None:
    problems: list[str] = []
    assert failed_hosts(Bucket({}, broken=True), "bkt", T0, problems) == ()
    assert problems == ["failed hosts: bucket not read (ConnectionError)"]


def test_the_summary_lists_the_failed_hosts_for_a_support_ticket() -> None:
    o = Observation(at=T0, phase="active", nodes=2, node0_reachable=True, usd_per_hour=10.0)
    assert "hosts that failed" not in summary_text(o, 24.0, "over_budget")
    listed = Observation(
        at=T0,
        phase="active",
        nodes=2,
        node0_reachable=True,
        usd_per_hour=10.0,
        failed_hosts=("GPU-a, GPU-b (pod p1: XID 79)",),
    )
    text = summary_text(listed, 24.0, "over_budget")
    assert text.endswith(
        "; hosts that failed this run (for a RunPod support ticket): GPU-a, GPU-b (pod p1: XID 79)"
    )
    assert failed_hosts_note(listed) in text
    again = RoundRecord.from_json(
        RoundRecord("prod", listed, Decision("none", "")).to_json()
    )  # the audit keeps them
    assert again.observation.failed_hosts == listed.failed_hosts
