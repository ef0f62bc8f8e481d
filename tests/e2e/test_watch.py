"""scripts/watch after a real `up`: RunPod's bill for the stack's resources, on the emulator's clock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e


def billed_directly(runpod: LocalRunPod, outputs: dict[str, object]) -> float:
    """The emulator's own accrual, read without watch/: every billing record of the stack's ids."""
    headers = {"Authorization": f"Bearer {runpod.api_key}"}
    queries = [("pods", "podId", n["pod_id"]) for n in outputs["nodes"]]  # type: ignore[attr-defined]
    if outputs.get("cluster_id"):
        queries.append(("clusters", "clusterId", outputs["cluster_id"]))
    if outputs.get("volume_id"):
        queries.append(("network-volumes", "networkVolumeId", outputs["volume_id"]))
    total = 0.0
    for path, key, value in queries:
        r = httpx.get(f"{runpod.base_url}/v2/billing/{path}", params={key: str(value)}, headers=headers)
        r.raise_for_status()
        total += sum(rec["totalAmount"] for rec in r.json()["records"])
    return total


@pytest.mark.parametrize("stack", ["dev", "prod"])  # a pod; a cluster with a volume
def test_watch_once_json_shows_what_runpod_billed(
    stack: str, tmp_path: Path, runpod: LocalRunPod, moto_s3: str
) -> None:
    run = open_stack(stack, tmp_path, runpod, moto_s3)
    run.up()
    try:
        outputs = run.outputs()
        assert outputs["workdir"]
        # A cluster stack bills under its cluster id (members meter there), so watch must read it too.
        topology = run.config()["trainstack:cluster"].get("topology")
        assert bool(outputs.get("cluster_id")) == (topology == "cluster")
        hours = 2.0
        runpod.admin.advance(hours * 3600)  # two hours of renting, on the emulator's clock
        # The emulator's clock keeps running while watch reads: its accrual is bracketed by two direct reads.
        low = billed_directly(runpod, outputs)
        proc = subprocess.run(
            [sys.executable, "-m", "watch", stack, "--cwd", str(run.cli.project), "--json"],
            cwd=REPO,
            env=run.cli.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.stdout.startswith("{"), proc.stderr[-3000:]
        data = json.loads(proc.stdout)
        spent = data["money"]["spent_usd"]
        assert data["money"]["source"] == "RunPod billing", data["problems"]
        high = billed_directly(runpod, outputs)
        assert low - 0.01 <= spent <= high + 0.01, (low, spent, high)
        # Two hours at the stack's price, at least (disk and volume add to the GPUs' share).
        assert spent >= 0.99 * outputs["cost_per_hour"] * hours * 0.9
        # The local RunPod here has no hosts: node 0 cannot be reached, which is critical (exit 1), said once.
        assert proc.returncode == 1
        assert any(p.startswith("aggregator:") for p in data["problems"])
        assert len(data["nodes"]) == len(outputs["nodes"])
        assert runpod.api_key not in proc.stdout + proc.stderr
    finally:
        run.destroy()
