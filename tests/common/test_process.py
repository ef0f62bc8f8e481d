"""common/process.py: the one rule a pid file's reader asks."""

from __future__ import annotations

import os
import subprocess
import sys

from common.process import alive


def test_a_live_process_is_alive_and_a_reaped_one_is_not() -> None:
    assert alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names nothing now (unless reused, which a just-freed pid is not)
    assert not alive(child.pid)


def test_a_process_we_may_not_signal_still_exists() -> None:
    assert alive(1)  # init: root may signal it, another user may not; either way it exists
