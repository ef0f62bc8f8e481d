"""Each resource's changes through the real CLI: what updates in place and what replaces, as specified
(docs/ARCHITECTURE.md, providers/README.md), then applied and settled with no drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e


def _ops(run: StackRun) -> dict[str, str]:
    """Resource name -> planned operation, from `pulumi preview --json`."""
    steps = json.loads(run.cli.run("preview", "--json", "--stack", run.stack).stdout)["steps"]
    return {s["urn"].rsplit("::", 1)[1]: s["op"] for s in steps if s["op"] != "same"}


def _set(run: StackRun, path: str, value: str) -> None:
    run.cli.run("config", "set", "--path", "--stack", run.stack, path, value)


def _apply_and_settle(run: StackRun, runpod: LocalRunPod) -> None:
    run.up()
    run.up("--expect-no-changes")
    run.refresh("--expect-no-changes")
    assert orphans(run) == [] and duplicates(runpod) == []


def test_prod_changes(tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("prod", tmp_path, runpod, moto_s3)
    run.up()
    old = run.outputs()["nodes"]

    _set(run, "trainstack:cluster.volume_gb", "2500")  # volumes grow in place
    _set(run, "trainstack:bucket.kms_key_id", "alias/rotated-key")  # re-encrypted in place
    run.cli.run(
        "config", "set", "--secret", "--stack", "prod", "trainstack:secrets.HF_TOKEN", "hf_rotated_value"
    )
    # A new secret value changes nothing at RunPod: secrets reach the nodes over SSH (delivery:SecretsFile;
    # this local RunPod has no hosts, so there is nothing to deliver to).
    assert _ops(run) == {"prod-volume": "update", "prod-checkpoints": "update"}
    _apply_and_settle(run, runpod)

    _set(run, "trainstack:cluster.image", "runpod/pytorch:2.5.0-py3.11-cuda12.4.1-devel-ubuntu22.04")
    assert _ops(run) == {"prod-cluster": "replace"}  # every cluster field but the name is fixed at create
    _apply_and_settle(run, runpod)
    assert {n["pod_id"] for n in run.outputs()["nodes"]}.isdisjoint({n["pod_id"] for n in old})

    _set(run, "trainstack:cluster.volume_gb", "1000")  # a volume never shrinks: refused at preview
    shrink = run.cli.run("preview", "--stack", "prod", check=False)
    assert shrink.returncode != 0 and "size_gb" in shrink.stdout + shrink.stderr
    _set(run, "trainstack:cluster.volume_gb", "2500")
    run.destroy()
    assert orphans(run) == []
    report.record(
        "changes: prod volume grow, bucket key, secret value, cluster image, volume shrink",
        "updates in place, cluster replaced, shrink refused at preview; no drift after",
        [],
        duplicates(runpod),
        runs=3,
    )


def test_dev_pod_changes(tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("dev", tmp_path, runpod, moto_s3)
    run.up()
    first = run.outputs()["nodes"][0]["pod_id"]

    _set(run, "trainstack:cluster.image", "runpod/pytorch:2.5.0-py3.11-cuda12.4.1-devel-ubuntu22.04")
    assert _ops(run) == {"dev-pod-0": "update"}  # PATCHed; the container restarts, the pod stays
    _apply_and_settle(run, runpod)
    assert run.outputs()["nodes"][0]["pod_id"] == first

    _set(run, "trainstack:cluster.gpus_per_node", "4")
    assert _ops(run) == {"dev-pod-0": "replace"}  # GPUs are fixed at create
    _apply_and_settle(run, runpod)
    assert run.outputs()["nodes"][0]["pod_id"] != first
    run.destroy()
    assert orphans(run) == []
    report.record(
        "changes: dev pod image, GPU count",
        "image updated in place (same pod), GPU count replaced; no drift after",
        [],
        duplicates(runpod),
        runs=2,
    )
