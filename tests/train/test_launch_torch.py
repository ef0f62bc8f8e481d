"""The one torchrun launch per node boot for real (train/node/launch.py) in the nodes' torch venv, on CPU with
2 ranks: the preflight in a forked child on a prefixed view of torchrun's store, the gate, then training in
the same workers with a process group of its own; and a refused node that torchrun's restarts never train."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.polling import scaled
from tests.torchvenv import VENV, needs

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, needs("torchrun")]


def _launch(tmp: Path, *preflight: str) -> subprocess.Popen[str]:
    env = {
        "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp),
        "PYTHONPATH": str(REPO),
        "TRAINSTACK_DEVICE": "cpu",
        "TRAINSTACK_STEPS": "20",
        "TRAINSTACK_LOG_EVERY": "10",
        "TRAINSTACK_CHECKPOINT_DIR": str(tmp / "ckpt"),
        "TRAINSTACK_PROGRESS_FILE": str(tmp / "progress.jsonl"),
        "OMP_NUM_THREADS": "1",
    }
    command = [
        "torchrun",
        "--standalone",
        "--nproc-per-node=2",
        "--max-restarts=1",
        "-m",
        "train.node.launch",
    ]
    command += ["--gate", str(tmp / "gate"), "--record", str(tmp / "health.json"), *preflight]
    command += ["--", str(REPO / "train" / "train.py")]
    (tmp / "gate").mkdir()
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    return subprocess.Popen(command, env=env, cwd=tmp, **pipe)


def _wait_for(proc: subprocess.Popen[str], *paths: Path) -> None:
    deadline = time.monotonic() + scaled(120)
    while not any(p.exists() for p in paths):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.1)


def test_preflight_then_the_gate_then_training_in_one_launch(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = _launch(tmp_path)
    try:
        _wait_for(proc, gate / "passed", gate / "failed")
        assert (gate / "passed").exists(), proc.communicate(timeout=60)[0]
        report = (gate / "preflight.out").read_text()
        assert "TRAINSTACK_ALLREDUCE ranks=2 " in report and "TRAINSTACK_BUSBW_GB_PER_S=" in report, report
        assert '"allreduce"' in (tmp_path / "health.json").read_text()
        # At the gate until `go` (the start script's resume): nothing has trained yet.
        assert proc.poll() is None and not (tmp_path / "progress.jsonl").exists()
        (gate / "go").touch()
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "first step 0 (fresh start)" in out and "done: steps 0..20" in out, out
    # Data parallel (train/train.py, by hand): rank 0's weights broadcast, each step's gradients averaged.
    assert "weights agree on 2 rank(s)" in out, out
    assert (tmp_path / "progress.jsonl").read_text().strip()


def test_a_refused_preflight_is_never_retried_into_training(tmp_path: Path) -> None:
    proc = _launch(tmp_path, "--busbw-floor-gb-per-s", "100000")
    out, _ = proc.communicate(timeout=scaled(180))
    assert proc.returncode != 0, out
    failed = (tmp_path / "gate" / "failed").read_text()
    assert "under the floor of 100000 GB/s" in failed, failed
    # torchrun restarted the group once (--max-restarts=1): the restart read the verdict and left at once.
    assert "the preflight refused this node (node: all-reduce bus bandwidth" in out, out
    assert "first step" not in out and not (tmp_path / "progress.jsonl").exists(), out
