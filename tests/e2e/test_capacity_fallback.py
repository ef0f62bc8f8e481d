"""Where can it run now: with `trainstack:cluster.data_centers` an ordered list, the preview reads the local
RunPod's stock (one catalog request) and warns, and `up` lands where there is stock, through the real CLI.

- prod (an Instant Cluster with a network volume): no H100 free in the first data center; the volume
  commits to the second, the cluster follows it, the state says so, and a later `up` with stock back in
  the first changes nothing (a volume never moves on its own).
- prod without a volume: the catalog shows stock but RunPod answers "no instances available" to the first
  create; the cluster's create falls back to the next data center, and only one cluster exists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import duplicates, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e

H100 = "NVIDIA H100 80GB HBM3"
STOCK_READ = "GET /v2/catalog/gpus/{id}"


def _stock_reads(runpod: LocalRunPod) -> int:
    return sum(runpod.admin.counters()["endpoints"].get(STOCK_READ, {}).values())


def _set(run: StackRun, path: str, value: str) -> None:
    run.cli.run("config", "set", "--path", "--stack", run.stack, path, value)


def _data_centers(run: StackRun, *ids: str) -> None:
    for i, dc in enumerate(ids):
        _set(run, f"trainstack:cluster.data_centers[{i}]", dc)


def _placed(run: StackRun) -> dict[str, Any]:
    """Each RunPod resource's data center as the state records it (outputs: the truth after create)."""
    state = json.loads(run.cli.run("stack", "export", "--stack", run.stack).stdout)
    found: dict[str, Any] = {}
    for res in state["deployment"]["resources"]:
        kind = res["type"].rsplit(":", 1)[-1]
        if kind in ("NetworkVolume", "InstantCluster"):
            found[kind] = res.get("outputs", {}).get("data_center_id")
    return found


def test_up_lands_in_the_second_data_center_when_the_first_has_no_stock(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    runpod.admin.capacity(stock={f"{H100}@EU-RO-1": 0})
    run = open_stack("prod", tmp_path, runpod, moto_s3, policy=True)
    _data_centers(run, "EU-RO-1", "US-TX-3")

    before = _stock_reads(runpod)
    preview = run.preview()
    assert _stock_reads(runpod) - before == 1  # one catalog request for the volume and the cluster
    said = preview.stdout + preview.stderr
    assert "capacity-available" in said and "none free in EU-RO-1" in said

    run.up()
    assert _placed(run) == {"NetworkVolume": "US-TX-3", "InstantCluster": "US-TX-3"}
    volumes = runpod.admin.live()["volumes"]
    assert [v["dataCenterId"] for v in volumes] == ["US-TX-3"]
    assert duplicates(runpod) == [] and orphans(run) == []

    runpod.admin.capacity(stock={})  # stock is back in EU-RO-1: the stack stays where its volume is
    run.up("--expect-no-changes")
    assert _placed(run)["NetworkVolume"] == "US-TX-3"
    run.destroy()
    assert orphans(run) == []


def test_a_cluster_without_a_volume_falls_back_on_no_instances_at_create(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("prod", tmp_path, runpod, moto_s3, policy=True)
    _data_centers(run, "EU-RO-1", "US-TX-3")
    _set(run, "trainstack:cluster.volume_gb", "0")
    runpod.admin.capacity(exhaustNext=1)  # the catalog shows stock; the first create is refused anyway
    run.up()
    assert _placed(run) == {"InstantCluster": "US-TX-3"}
    clusters = runpod.admin.live()["clusters"]
    assert len(clusters) == 1
    with runpod.client() as api:  # RunPod's own record of where it runs
        assert api.get(f"/v2/clusters/{clusters[0]['id']}").json()["dataCenterId"] == "US-TX-3"
    posts = runpod.admin.counters()["endpoints"]["POST /v2/clusters"]
    assert posts == {"400": 1, "201": 1}, posts  # refused once in EU-RO-1, created once in US-TX-3
    assert duplicates(runpod) == []
    run.up("--expect-no-changes")
    run.destroy()
    assert orphans(run) == []
