"""The GPT job for real on CPU (gloo, 2 ranks, tiny model) in the torch venv: a run stopped by SIGTERM after
a checkpoint under FSDP, resumed under DDP from that checkpoint, progress lines that follow the contract."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.polling import scaled
from tests.torchvenv import VENV, needs
from train.node.progress import parse_line
from train.shards import write_synthetic

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, needs("torchrun")]


def _job(tmp: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp),
        "TRAINSTACK_DEVICE": "cpu",
        "TRAINSTACK_DATA_DIR": str(tmp / "data"),
        "TRAINSTACK_CHECKPOINT_DIR": str(tmp / "ckpt"),
        "TRAINSTACK_PROGRESS_FILE": str(tmp / "progress.jsonl"),
        "OMP_NUM_THREADS": "1",
    }
    command = ["torchrun", "--standalone", "--nproc-per-node=2", str(REPO / "train" / "gpt_train.py")]
    command += ["--model", "tiny", "--micro-batch", "2", "--checkpoint-every", "3", "--log-every", "1", *args]
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    return subprocess.Popen(command, env=env, cwd=tmp, **pipe)


def test_fsdp_run_stops_on_sigterm_and_ddp_resumes(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "data", shards=2, tokens_per_shard=5000, vocab_size=512)
    first = _job(tmp_path, "--steps", "1000", "--sharding", "fsdp")
    deadline = time.monotonic() + scaled(240)
    while not list((tmp_path / "ckpt").glob("step-*.pt")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)  # torchrun passes it on, as the start script's trap does
    out, _ = first.communicate(timeout=120)
    stopped = next(line for line in out.splitlines() if line.startswith("stopping at step"))
    step = int(stopped.split()[3])
    assert (tmp_path / "ckpt" / f"step-{step:08d}.pt").exists(), out

    second = _job(tmp_path, "--steps", str(step + 2), "--sharding", "ddp")
    out, _ = second.communicate(timeout=240)
    assert second.returncode == 0, out
    assert f"first step {step} (resumed from step-{step:08d}.pt of global rank 0)" in out
    summary = json.loads(next(x for x in out.splitlines() if x.startswith("TRAINSTACK_SUMMARY"))[19:])
    assert (summary["first_step"], summary["last_step"], summary["world"]) == (step, step + 2, 2)
    assert summary["tokens_per_s"] > 0 and summary["mfu"] is None  # no peak known on CPU
    lines = [parse_line(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert lines[-1].step == step + 2 and lines[-1].tokens_per_s is not None
    # the checkpoint saves' running total (the ledger's checkpoint stall): said, and it never goes back
    # within the resumed job (which saved at its last step)
    resumed = [p.checkpoint_s for p in lines if p.step > step]
    assert resumed and all(s is not None and s >= 0 for s in resumed)
    assert resumed == sorted(resumed) and resumed[-1] > 0
