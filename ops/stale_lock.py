"""Whether a stack's Pulumi update lock is stale: what `scripts/recover` checks instead of asking.

    python -m ops.stale_lock STACK      (PULUMI_BACKEND_URL from the environment; prints one line)

Exit 0: no lock, or every lock was taken by a process of this machine that is no longer running (a killed
`up`): safe to remove. 1: a lock of a process that still runs here (an `up` under way). 2: cannot tell (a
lock of another machine, or a backend other than the file backend, whose locks are not read here).
Pulumi's file backend writes a lock per update at `.pulumi/locks/<org>/<project>/<stack>/<id>.json`
holding the pid and hostname of the process that took it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from common import process

STALE, LIVE, UNKNOWN = 0, 1, 2


def lock_state(backend_url: str, stack: str, host: str | None = None) -> tuple[int, str]:
    if not backend_url.startswith("file://"):
        return UNKNOWN, f"the backend {backend_url.split('?')[0]} is not a local file backend"
    root = Path(backend_url.removeprefix("file://")) / ".pulumi" / "locks"
    locks = sorted(p for p in root.glob(f"**/{stack}/*.json") if p.is_file()) if root.is_dir() else []
    if not locks:
        return STALE, f"'{stack}' holds no update lock"
    host = host or socket.gethostname()
    for path in locks:
        try:
            info = json.loads(path.read_text())
            pid, owner = int(info["pid"]), str(info["hostname"])
        except (OSError, ValueError, KeyError, TypeError):
            return UNKNOWN, f"the lock {path.name} cannot be read"
        if owner != host:
            return (
                UNKNOWN,
                f"the lock was taken on {owner}, not here: only its owner knows whether it still runs",
            )
        if process.alive(pid):
            return (
                LIVE,
                f"the lock is held by pid {pid}, still running here: an update of '{stack}' is under way",
            )
    return STALE, f"'{stack}' is locked by a process of this machine that is gone (a killed up): stale"


def main(argv: list[str]) -> int:
    code, line = lock_state(os.environ.get("PULUMI_BACKEND_URL", ""), argv[0])
    print(f"scripts/recover: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
