"""A hang's diagnostics (train/node/diagnostics.py): the failure cause from a log, the node's ranks found in
/proc (a SIGSTOPped one named), a bundle with no secret in it, the environment taken from the start script."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.polling import poll
from train.node import diagnostics as d


@pytest.mark.parametrize(
    ("lines", "cause"),
    [
        (["step 10", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], "oom"),
        (
            ["[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE)"],
            "nccl_timeout",
        ),
        (["TRAINSTACK_FAIL config: unknown --model"], "config"),
        (["train.py: error: unrecognized arguments: --lr2"], "config"),
        (["Traceback", "ValueError: bad shard"], None),
        # the newest cause wins: an OOM that followed an earlier (recovered) timeout
        (["Watchdog caught collective operation timeout", "CUDA out of memory"], "oom"),
    ],
)
def test_classify(lines: list[str], cause: str | None) -> None:
    assert d.classify(lines) == cause


@pytest.fixture
def a_stopped_rank() -> object:
    env = {
        **os.environ,
        "RANK": "5",
        "LOCAL_RANK": "1",
        "TORCHELASTIC_RUN_ID": "t",
        "HF_TOKEN": "hf_secret123",
    }
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        yield child
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()


def test_a_stopped_rank_is_found_and_named(a_stopped_rank: subprocess.Popen[bytes], tmp_path: Path) -> None:
    pid = a_stopped_rank.pid
    rank = poll(
        lambda: next((r for r in d.ranks() if r.pid == pid and r.stopped), None), "the stopped rank", 60
    )
    assert (rank.rank, rank.local_rank, rank.state) == (5, 1, "T")
    assert "rank 5 (pid" in d.summary("pod-a", [rank]) and "stopped" in d.summary("pod-a", [rank])
    trace = tmp_path / "diag" / "nccl-trace-pod-a-rank"
    trace.parent.mkdir()
    (tmp_path / "diag" / "nccl-trace-pod-a-rank5").write_bytes(b"\x80flight-recorder")
    out = d.bundle(tmp_path / "bundle", "pod-a", [rank], str(trace))
    names = sorted(p.name for p in out.iterdir())
    assert names == ["nccl-trace-nccl-trace-pod-a-rank5", f"py-spy-rank5-pid{pid}.txt", "ranks.json"]
    assert json.loads((out / "ranks.json").read_text())["ranks"][0]["state"] == "T"
    everything = b"".join(p.read_bytes() for p in out.iterdir())
    assert b"hf_secret123" not in everything  # only RANK / LOCAL_RANK were read from its environment


def test_env_of_keeps_only_what_the_tool_needs(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    env = b"\0".join(
        [b"AWS_ENDPOINT_URL_S3=http://127.0.0.1:9", b"TRAINSTACK_RUN_ID=r1", b"HF_TOKEN=x", b"PATH=/bin"]
    )
    (tmp_path / "42" / "environ").write_bytes(env)
    assert d.env_of(42, proc=tmp_path) == {
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
        "TRAINSTACK_RUN_ID": "r1",
    }


def test_heartbeat_writes_the_node_file(tmp_path: Path) -> None:
    d.heartbeat(tmp_path, "pod-a", every_s=0, rounds=1)
    body = json.loads((tmp_path / "pod-a.json").read_text())
    assert body["node"] == "pod-a" and isinstance(body["ranks"], list) and body["time"] > 0


@pytest.mark.root
def test_ranks_of_another_network_namespace_are_not_this_nodes(tmp_path: Path) -> None:
    """Emulated hosts are network namespaces sharing the host's pids: a node lists only its own ranks."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare: a network namespace of its own")
    env = {**os.environ, "RANK": "7", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "t"}
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    here = subprocess.Popen(sleeper, env=env)
    there = subprocess.Popen(["unshare", "-n", *sleeper], env=env)
    try:
        poll(lambda: here.pid in {r.pid for r in d.ranks()}, "the rank in this namespace", 30)
        own = os.readlink("/proc/self/ns/net")

        def moved() -> bool:  # unshare execs the sleeper once the namespace is made
            try:
                return (
                    os.readlink(f"/proc/{there.pid}/ns/net") != own
                    and b"time.sleep" in Path(f"/proc/{there.pid}/cmdline").read_bytes()
                )
            except OSError:
                return False

        poll(moved, "the rank in another namespace", 30)
        other = there.pid
        assert other not in {r.pid for r in d.ranks()}
    finally:
        for p in (here, there):
            p.kill()
            p.wait()
