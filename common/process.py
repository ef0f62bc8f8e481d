"""Whether a process id names a live process (standard library only): the one rule every pid file's reader
asks, so that a pid file left by a killed process is read as stale the same way everywhere; and a process
tree killed whole (the Pulumi CLI starts its plugins in process groups of their own)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` exists, whoever owns it (a process we may not signal still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def descendants(root: int) -> set[int]:
    """`root` and every process below it, read from /proc (Linux)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found


def kill_tree(root: int) -> None:
    """SIGKILL a process, its process group and every descendant.

    Pulumi starts its plugins (language host, providers) in process groups of their own, so killing the
    CLI's group alone would leave a provider running on after the CLI."""
    doomed = descendants(root)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, signal.SIGKILL)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
