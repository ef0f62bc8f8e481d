"""scripts/recover checks the update lock instead of asking: stale (a killed up here), live, unknown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ops.stale_lock import LIVE, STALE, UNKNOWN, lock_state


def _lock(backend: Path, stack: str, pid: int, host: str) -> None:
    where = backend / ".pulumi" / "locks" / "organization" / "trainstack" / stack
    where.mkdir(parents=True, exist_ok=True)
    (where / "0c5f.json").write_text(json.dumps({"pid": pid, "username": "root", "hostname": host}))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # reaped: no process has it (until the kernel reuses it, far later)


def test_no_lock_and_a_killed_ups_lock_are_stale(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    assert lock_state(url, "prod", host="vm")[0] == STALE
    _lock(tmp_path, "prod", _dead_pid(), "vm")
    code, line = lock_state(url, "prod", host="vm")
    assert code == STALE and "gone" in line


def test_a_running_updates_lock_is_live_and_another_machines_unknown(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    _lock(tmp_path, "prod", os.getpid(), "vm")
    assert lock_state(url, "prod", host="vm")[0] == LIVE
    assert lock_state(url, "prod", host="laptop")[0] == UNKNOWN  # taken on "vm", asked from elsewhere
    assert lock_state(url, "dev", host="vm")[0] == STALE  # another stack's lock is not this one's
    assert lock_state("s3://team-state?region=us-east-1", "prod")[0] == UNKNOWN
