"""`pulumi up` killed at seeded points: `scripts/recover` then `up` converge with nothing orphaned or doubled.

Kill points are counted in RunPod API requests, not seconds: the run is stopped (SIGKILL to the CLI and
every process under it: language host, providers) as soon as the local RunPod has answered the k-th request of
that `up`, with k drawn from a seeded generator. That reaches every phase (listing, creating, polling,
recording) deterministically on any machine speed.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO, kill_tree
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e

SEED = 20261129
RUNS = 10


def _requests(runpod: LocalRunPod) -> int:
    endpoints = runpod.admin.counters()["endpoints"]
    return sum(sum(by_status.values()) for by_status in endpoints.values())


def _up_killed_after(run: StackRun, runpod: LocalRunPod, k: int) -> bool:
    """Start `up`; SIGKILL its process group once RunPod served k more requests. True if it was killed."""
    start = _requests(runpod)
    args = ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", run.stack]
    proc = subprocess.Popen(
        args, cwd=run.cli.project, env=run.cli.env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    # The server answers the moment it has counted the k-th request (a long poll: no spinning on its
    # counters); each wait is short so an `up` that ends before the kill point is seen.
    while not runpod.admin.requests_reach(start + k, timeout_s=0.5):
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, "up neither finished nor reached the kill point in 120 s"
    if proc.poll() is not None:
        return False
    kill_tree(proc.pid)
    proc.wait()
    return True


def _tear_sidecar(run: StackRun) -> Path:
    """What a kill during the file backend's in-place write of `<stack>.json.attrs` leaves: an empty sidecar,
    after which every command fails with "failed to load checkpoint: EOF" (ops/backend_repair.py)."""
    backend = Path(run.cli.env()["PULUMI_BACKEND_URL"].removeprefix("file://"))
    (attrs,) = backend.glob(f".pulumi/stacks/*/{run.stack}.json.attrs")
    attrs.write_bytes(b"")
    return attrs


def _recover(run: StackRun) -> str:
    done = subprocess.run(
        [str(REPO / "scripts/recover"), run.stack, "--yes", "--cwd", str(run.cli.project)],
        env=run.cli.env(), check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"scripts/recover failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_killed_up_recovers(tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack("search", tmp_path, runpod, moto_s3)
    run.up()
    rng = random.Random(SEED)
    killed = 0
    # The pool shrinks and grows in turn, so every interrupted up is deleting or creating pods.
    for i in range(RUNS):
        run.cli.run(
            "config",
            "set",
            "--path",
            "--stack",
            run.stack,
            "trainstack:cluster.nodes",
            "2" if i % 2 == 0 else "4",
        )
        killed += _up_killed_after(run, runpod, rng.randint(1, 12))
        torn = _tear_sidecar(run) if i == 0 else None
        said = _recover(run)
        if torn is not None:
            assert f"/{torn.name}, an attributes file" in said, said
        run.cli.run("up", "--yes", "--skip-preview", "--stack", run.stack)
        run.cli.run("preview", "--expect-no-changes", "--stack", run.stack)
        assert orphans(run) == [] and duplicates(runpod) == []
    run.destroy()
    assert orphans(run) == []
    report.record(
        "crash: `up` killed at 10 seeded request counts, then scripts/recover + up",
        f"converged {RUNS}/{RUNS} ({killed} killed mid-run, creating or deleting pods)",
        orphans(run),
        duplicates(runpod),
        runs=RUNS,
    )
    assert killed >= RUNS // 2, "most kill points should land inside the up"
