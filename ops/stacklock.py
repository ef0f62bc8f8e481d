"""The per-stack lock `up` holds while it runs (and `down`, `recover` check): `fcntl.flock` on one file.

One lock per stack and state backend: the demo's `dev` and a `dev` kept in another backend (a test's throwaway
one, a second checkout's state) are different stacks, and an up of one never waits on, or is refused by, the
other. The lock file holds the pid of its holder, for the message of whoever is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from common.pulumi import REPO, default_backend


class StackLocked(Exception):
    """Another process of this machine holds the stack's lock; `pid` is what its file says."""

    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


def lock_path(stack: str, env: Mapping[str, str], repo: Path = REPO) -> Path:
    backend = env.get("PULUMI_BACKEND_URL") or default_backend(repo)
    key = hashlib.sha256(backend.encode()).hexdigest()[:12]
    return repo / ".state" / "locks" / key / f"{stack}.lock"


@contextlib.contextmanager
def held(stack: str, env: Mapping[str, str], write_pid: bool, repo: Path = REPO) -> Iterator[Path]:
    """Hold the stack's lock for the block, or raise StackLocked at once (never waits). `write_pid`: an up
    records its pid; down and recover only prove no up runs. The descriptor is not inherited by children
    (Python opens it non-inheritable), so a local RunPod started meanwhile does not keep it."""
    path = lock_path(stack, env, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise StackLocked(f.read().strip() or "?") from None
        if write_pid:
            f.truncate(0)
            f.write(f"{os.getpid()}\n")
            f.flush()
        try:
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
