"""Whether a process id names a live process (standard library only): the one rule every pid file's reader
asks, so that a pid file left by a killed process is read as stale the same way everywhere."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while `pid` exists, whoever owns it (a process we may not signal still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
