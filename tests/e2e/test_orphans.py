"""A resource the state lost still bills: `pulumi destroy` leaves it; scripts/recover lists it with its $/h
and, when asked, deletes it, so destroy through our scripts leaves nothing (issue 24.3)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO, run_killing_tree
from tests.e2e.reliability import Report, live_ids
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e


def _recover(run: StackRun, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [str(REPO / "scripts/recover"), run.stack, "--yes", *flags, "--cwd", str(run.cli.project)]
    done = run_killing_tree(argv, 300, env=run.cli.env())
    assert done.returncode == 0, f"scripts/recover failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def test_recover_lists_and_deletes_what_destroy_cannot_see(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("search", tmp_path, runpod, moto_s3)
    run.up()
    # The state loses one pod, as when `up` is killed after RunPod accepted the create but before Pulumi
    # wrote the id down; a stranger's pod with a look-alike name must never be touched.
    (lost,) = [
        r for r in run.cli.resources() if r.get("outputs", {}).get("name") == "trainstack-search-pod-1"
    ]
    run.cli.run("state", "delete", lost["urn"], "--yes", "--stack", run.stack)
    with runpod.client() as client:
        stranger = client.post(
            "/v2/pods",
            json={"name": "trainstack-search-2-pod-0", "image": "runpod/pytorch:2.4.0",
                  "gpu": {"id": "NVIDIA H100 80GB HBM3", "count": 1}, "cloud": "SECURE"},
        )  # fmt: skip
        assert stranger.status_code == 201, stranger.text
    stranger_id = stranger.json()["id"]
    run.destroy()
    assert set(live_ids(runpod)) == {lost["id"], stranger_id}, "destroy cannot see the pod the state lost"

    listed = _recover(run)
    assert "trainstack-search-pod-1" in listed.stderr and lost["id"] in listed.stderr
    assert "/h" in listed.stderr and "trainstack-search-2-pod-0" not in listed.stderr
    assert set(live_ids(runpod)) == {lost["id"], stranger_id}, "--yes alone lists, never deletes"

    deleted = _recover(run, "--delete-orphans")
    assert f"deleted pod trainstack-search-pod-1 ({lost['id']})" in deleted.stderr
    assert set(live_ids(runpod)) == {stranger_id}
    report.record(
        "orphan on destroy: a pod the state lost, then `pulumi destroy`",
        "scripts/recover listed it with its $/h and deleted it on request; a look-alike stranger kept",
        [],
        [],
        runs=1,
    )
