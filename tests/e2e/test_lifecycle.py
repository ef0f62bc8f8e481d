"""Every shipped stack's whole life with the real CLI: up, no-op up, no-op refresh, a node lost out of band,
refresh sees it, up repairs it and the artifacts follow, destroy leaves nothing live on the local RunPod."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e


def _live(runpod: LocalRunPod) -> dict[str, list[object]]:
    live = runpod.admin.live()
    return {kind: live[kind] for kind in ("pods", "clusters", "volumes", "secrets")}


@pytest.mark.parametrize("stack", ["dev", "search", "prod"])
def test_stack_lifecycle(
    stack: str, tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    run = open_stack(stack, tmp_path, runpod, moto_s3, policy=True)
    cluster_cfg = run.config()["trainstack:cluster"]
    nodes = int(cluster_cfg.get("nodes", 1))

    first_up = run.up(preview=True)  # the spend-limit warning is said in the preview
    # Only prod relies on a raised account spend limit, which RunPod's API cannot confirm (issue 24.11).
    assert ("declares $300/h" in first_up.stdout and "UNVERIFIED" in first_up.stdout) == (stack == "prod")
    hostfile = (run.out_dir / stack / "hostfile").read_text().splitlines()
    assert len(hostfile) == nodes
    assert sorted(p.name for p in (run.out_dir / stack).glob("start-node-*.sh")) == sorted(
        f"start-node-{r}.sh" for r in range(nodes)
    )
    first = run.outputs()
    assert first["cost_per_hour"] > 0
    # The state holds each start script's digest, not the script (~19 KB a node, rewritten at every step).
    (component,) = [r for r in run.cli.resources() if r["type"] == "trainstack:index:H100Cluster"]
    scripts = sorted((run.out_dir / stack).glob("start-node-*.sh"))
    assert component["outputs"]["start_script_sha256"] == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in scripts
    }
    stored = json.dumps(component)  # the scripts' text, JSON-escaped as the state would hold it
    assert not any(json.dumps(p.read_text())[1:201] in stored for p in scripts)
    assert runpod.admin.live()["duplicates"] == {"pod": [], "cluster": [], "volume": [], "secret": []}

    run.up("--expect-no-changes")
    run.refresh("--expect-no-changes")

    # A node disappears behind Pulumi's back (a host failure, a console click).
    lost = first["nodes"][-1]
    runpod.admin.out_of_band(lost["pod_id"])
    drift = run.refresh(check=False)
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert "no changes" not in drift.stdout.lower() or "deleted" in drift.stdout.lower()

    run.up()
    repaired = run.outputs()
    assert len(repaired["nodes"]) == nodes
    assert lost["pod_id"] not in {n["pod_id"] for n in repaired["nodes"]}
    new_hostfile = (run.out_dir / stack / "hostfile").read_text()
    assert new_hostfile == repaired["hostfile"]
    run.up("--expect-no-changes")

    orphaned, duplicated = orphans(run), duplicates(runpod)
    assert orphaned == [] and duplicated == []
    run.destroy()
    assert _live(runpod) == {"pods": [], "clusters": [], "volumes": [], "secrets": []}
    report.record(
        f"lifecycle: `{stack}` stack",
        "up; no-op up; no-op refresh; node lost out of band, refresh saw it, up repaired it and the "
        "hostfile followed; destroy left nothing live",
        orphaned,
        duplicated,
        runs=6,
    )
