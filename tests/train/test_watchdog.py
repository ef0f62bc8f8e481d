"""The node's watchdog (train/node/watchdog.py): a SIGSTOPped rank is ended (a real process), a restart-class
XID restarts in place, a replace-class one is left to the supervisor, each restart is recorded, and the pace
file gives a restarted job its process group's timeout (train/node/launch.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from train.node import diagnostics, hang, launch
from train.node.progress import Progress
from train.node.watchdog import Watchdog

B = hang.Bounds()


def line(step: int, checkpoint_s: float) -> Progress:
    return Progress(step, 0.5, 100.0, None, 1.0, None, checkpoint_s)


def gpu(index: int, xids: tuple[int, ...] = ()) -> SimpleNamespace:
    """What the watchdog reads of a GpuReading: its index and its XIDs since the sampler started."""
    return SimpleNamespace(index=index, xid_events=xids)


class Kills:
    def __init__(self) -> None:
        self.pids: list[int] = []

    def __call__(self, pids: Sequence[int]) -> None:
        self.pids += list(pids)


def watchdog(tmp_path: Path, ranks: list[diagnostics.Rank], kill: object = None) -> Watchdog:
    return Watchdog(
        "p1",
        B,
        tmp_path / "progress.busy",
        tmp_path / "node-restarts-p1.jsonl",
        pace_file=tmp_path / "pace.p1.json",
        bundles=tmp_path / "diagnostics",
        find_ranks=lambda: ranks,
        kill=kill or Kills(),  # type: ignore[arg-type]
        log=lambda _: None,
    )


def test_a_sigstopped_rank_is_ended_after_the_bound_and_recorded(tmp_path: Path) -> None:
    env = os.environ | {"RANK": "3", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "test"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        # Only this test's process: a broad /proc search could find another test's ranks on this machine.
        mine = [r for r in diagnostics.ranks() if r.pid == proc.pid]
        while not mine or not mine[0].stopped:  # the kernel shows state T once the signal is delivered
            mine = [r for r in diagnostics.ranks() if r.pid == proc.pid]
        assert mine[0].rank == 3
        dog = Watchdog(
            "p1",
            B,
            None,
            tmp_path / "node-restarts-p1.jsonl",
            bundles=tmp_path / "diagnostics",
            find_ranks=lambda: [r for r in diagnostics.ranks() if r.pid == proc.pid],
            log=lambda _: None,
        )
        for now, step, saved in ((0, 10, 0.0), (10, 20, 2.0), (20, 30, 2.0)):
            assert dog.tick(line(step, saved), [], now) is None
        assert dog.tick(None, [], 20 + B.floor_s) is None  # silent, not yet past the bound
        rec = dog.tick(None, [], 20 + B.floor_s + 5)
        assert rec is not None and rec.cause == "hang" and rec.ranks == [3]
        assert proc.wait(timeout=30) == -signal.SIGKILL
        written = [json.loads(x) for x in (tmp_path / "node-restarts-p1.jsonl").read_text().splitlines()]
        assert [w["cause"] for w in written] == ["hang"] and "no new step for 95 s" in written[0]["reason"]
        summary = json.loads((Path(rec.bundle or "") / "ranks.json").read_text())["summary"]
        assert f"rank 3 (pid {proc.pid}) stopped" in summary  # the bundle was taken before the kill
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_long_save_is_not_ended(tmp_path: Path) -> None:
    kills = Kills()
    dog = watchdog(tmp_path, [diagnostics.Rank(42, 0, 0, "S")], kills)
    for now, step, saved in ((0, 10, 0.0), (10, 20, 2.0), (20, 30, 2.0)):
        dog.tick(line(step, saved), [], now)
    (tmp_path / "progress.busy").write_text('{"v": 1, "what": "saving"}')
    for now in range(25, 1500, 5):
        assert dog.tick(None, [], now) is None
    assert kills.pids == []


def test_a_restartable_xid_restarts_in_place_and_a_replace_one_does_not(tmp_path: Path) -> None:
    kills = Kills()
    dog = watchdog(tmp_path, [diagnostics.Rank(42, 0, 0, "R")], kills)
    dog.tick(line(10, 0.0), [gpu(0), gpu(1)], 0)
    assert dog.tick(line(20, 0.0), [gpu(0, (79,)), gpu(1)], 5) is None  # the supervisor's: replace
    rec = dog.tick(line(30, 0.0), [gpu(0, (79,)), gpu(1, (13,))], 10)
    assert rec is not None and rec.cause == "xid" and "XID 13" in rec.reason and kills.pids == [42]
    assert dog.tick(line(40, 0.0), [gpu(0, (79,)), gpu(1, (13,))], 15) is None  # each event once


def test_the_restarted_job_gets_its_timeout_from_the_pace(tmp_path: Path) -> None:
    dog = watchdog(tmp_path, [])
    for now, step, saved in ((0, 10, 0.0), (10, 20, 2.0), (20, 30, 2.0)):
        dog.tick(line(step, saved), [], now)
    env = {"TRAINSTACK_PACE_FILE": str(tmp_path / "pace.p1.json")}
    launch.pg_timeout_env(env)
    assert env["TRAINSTACK_PG_TIMEOUT_S"] == f"{B.floor_s + hang.PG_MARGIN_S:.0f}"
    fresh = {"TRAINSTACK_PACE_FILE": str(tmp_path / "none.json")}
    launch.pg_timeout_env(fresh)  # no pace yet: PyTorch's 10 minutes and the margin
    assert fresh["TRAINSTACK_PG_TIMEOUT_S"] == f"{B.unlearned_s + hang.PG_MARGIN_S:.0f}"


def test_a_restart_torchrun_made_on_its_own_gets_the_restarts_bound(tmp_path: Path) -> None:
    kills = Kills()
    dog = watchdog(tmp_path, [diagnostics.Rank(42, 0, 0, "R")], kills)
    env = {"TRAINSTACK_PACE_FILE": str(tmp_path / "pace.p1.json"), "LOCAL_RANK": "0"}
    launch.mark_start(env | {"TORCHELASTIC_RESTART_COUNT": "0"})  # the first start, before any step
    for now, step, saved in ((0, 10, 0.0), (10, 20, 2.0), (20, 30, 2.0)):
        dog.tick(line(step, saved), [], now)
    launch.mark_start(env | {"TORCHELASTIC_RESTART_COUNT": "1"})  # a rank crashed: torchrun restarted them
    os.utime(tmp_path / "pace.p1.json.start", ns=(1, 1))  # a new mtime, whatever the file system's resolution
    assert dog.tick(None, [], 30) is None
    assert dog.tick(None, [], 30 + B.floor_s + 5) is None and kills.pids == []  # booting, not hung
    assert dog.tick(None, [], 30 + B.restart_s + 1) is not None and kills.pids == [42]


def test_every_node_takes_its_stacks_before_any_node_ends_its_ranks(tmp_path: Path) -> None:
    # The node whose rank is stopped may have a larger bound than a peer that acts first (whose restart then
    # ends the stopped rank through torchrun's rendezvous): the stacks come at 70 % of the bound, no kill.
    kills = Kills()
    dog = watchdog(tmp_path, [diagnostics.Rank(42, 2, 0, "T")], kills)
    for now, step, saved in ((0, 10, 0.0), (10, 20, 2.0), (20, 30, 2.0)):
        dog.tick(line(step, saved), [], now)
    assert dog.tick(None, [], 20 + 60) is None and not (tmp_path / "diagnostics").exists()  # under 63 s
    assert dog.tick(None, [], 20 + 0.7 * B.floor_s + 1) is None and kills.pids == []
    [taken] = (tmp_path / "diagnostics").glob("node-*/p1/ranks.json")
    assert "rank 2 (pid 42) stopped" in json.loads(taken.read_text())["summary"]
    rec = dog.tick(None, [], 20 + B.floor_s + 1)
    assert rec is not None and kills.pids == [42] and rec.bundle == str(taken.parent)
