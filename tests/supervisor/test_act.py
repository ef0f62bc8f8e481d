"""The actuator's pure parts: which Pulumi lock it may clear, and the run summary's text."""

from __future__ import annotations

import subprocess
from pathlib import Path

from supervisor.act import stale_lock_holder, summary_text
from supervisor.model import Observation, RunState
from tests.polling import poll

LOCKED = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
    "delete the lock file with `pulumi cancel`.\n  file:///s/.pulumi/locks/org/trainstack/dev/x.json: "
    "created by root@{host} (pid {pid}) at 2026-12-01T09:46:26Z"
)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_lock_of_a_dead_process_of_this_machine_is_stale() -> None:
    pid = _dead_pid()
    assert stale_lock_holder(LOCKED.format(host="box", pid=pid), host="box") == f"root@box (pid {pid})"


def test_a_lock_held_elsewhere_or_by_a_live_pulumi_is_never_cleared() -> None:
    assert stale_lock_holder(LOCKED.format(host="ci-runner", pid=_dead_pid()), host="box") is None
    live = subprocess.Popen(["bash", "-c", "exec -a pulumi sleep 60"])
    cmdline = Path(f"/proc/{live.pid}/cmdline")
    poll(lambda: cmdline.read_bytes().startswith(b"pulumi"), "the fake pulumi's exec", 10, 0.01)
    try:
        assert stale_lock_holder(LOCKED.format(host="box", pid=live.pid), host="box") is None
    finally:
        live.kill()
        live.wait()
    assert stale_lock_holder("error: update failed: quota exceeded", host="box") is None


def test_summary_has_steps_loss_wall_time_spend_and_savings() -> None:
    run = RunState("dev-pod-0.p", "finished", True, last_step=500, final_loss=0.125, started_at=1000.0)
    obs = Observation(
        at=1000.0 + 1800, phase="active", nodes=1, node0_reachable=True, spent_usd=16.0,
        usd_per_hour=32.0, forecast_usd=20.0, runs=(run,),
    )  # fmt: skip
    text = summary_text(obs, max_run_hours=2.0, why="run finished")
    assert "steps: 500" in text and "final loss: 0.125" in text and "wall time: 0.50 h" in text
    assert "spent $16.00 (forecast $20.00)" in text and "saved about $48.00" in text
