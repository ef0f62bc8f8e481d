"""The addresses one local RunPod's hosts use, so that several coexist on one machine.

The demo's local RunPod (left running by `scripts/up`), the tests' own, and those of other checkouts all
make hosts on the same kernel, where one subnet can sit on one interface only. Each server that makes
hosts therefore claims a slot N (0-63) and keeps to its addresses:

- its bridge `tsbrN`, host address 10.250.N.1/24 (unless a bridge is named explicitly);
- Instant Cluster subnets 10.(64+N).x.0/24, one per cluster;
- loose pods' global-networking range 100.(65+N).0.0/16 (slot 0 is RunPod's own 100.65.0.0/16).

A claim is a file `netslot-N` holding the server's pid in /run/trainstack (`TRAINSTACK_NETSLOT_DIR`), made
under an exclusive lock of that folder's `.lock` (two servers starting at once never take one slot); a file
whose pid is gone (or 0: given back by a server that stopped) is a stale claim. A server takes the slot its
state used last if no running server holds it; else an untouched slot; else the stale claim left longest ago
(the file's mtime), so a server stopped and started again gets its addresses back while others start in its
gap, also on a machine where every slot has been used once (the claims stay; seen in a CI run whose machine
had run the suite for hours). Without hosts no address is ever configured, and every server uses slot 0.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from common import process

SLOTS = 64  # 10.64.0.0/10 holds 64 blocks of 256 cluster subnets
POD_NET_PREFIX = 16


def claims_dir() -> Path:
    return Path(os.environ.get("TRAINSTACK_NETSLOT_DIR") or "/run/trainstack")


@dataclass(frozen=True)
class NetSlot:
    """One server's share of the host address space."""

    index: int = 0

    def cluster_cidr(self, seq: int) -> str:
        """The subnet of the server's `seq`-th cluster (seq counts from 1 and wraps after 256)."""
        return f"10.{64 + self.index}.{seq % 256}.0/24"

    @property
    def pod_net_gateway(self) -> str:
        return f"100.{65 + self.index}.0.1"

    def pod_ip(self, digest: int) -> str:
        """A loose pod's private address from its id's digest (never the gateway: the last octet is 1-254,
        and .0.1 is skipped by starting the third octet's pods at .2 when it is 0)."""
        third, last = digest // 256 % 256, digest % 254 + 1
        if third == 0 and last == 1:
            last = 2
        return f"100.{65 + self.index}.{third}.{last}"

    def owns_pod_ip(self, ip: str) -> bool:
        net = ipaddress.ip_network(f"100.{65 + self.index}.0.0/{POD_NET_PREFIX}")
        return ipaddress.ip_address(ip) in net

    @property
    def bridge_name(self) -> str:
        return f"tsbr{self.index}"

    @property
    def bridge_cidr(self) -> str:
        return f"10.250.{self.index}.1/24"


@dataclass(frozen=True)
class SlotClaim:
    """A held slot; `release` gives it back (idempotent)."""

    slot: NetSlot
    path: Path

    def release(self) -> None:
        """Leave the slot to no process (the claim file holds 0, its mtime says when), not a free slot: like a
        killed server's stale claim, it is taken first by the state that used it (its `preferred`), by
        others only after every untouched slot and every claim given back before it, so a server stopped and
        started again gets its addresses back even while other servers start meanwhile (seen beside the
        parallel lane: the demo's server took the slot between a stop and a start)."""
        with contextlib.suppress(FileNotFoundError):
            if self.path.read_text().strip() == str(os.getpid()):
                self.path.write_text("0\n")


def _holder(path: Path) -> int | None:
    """The pid in a claim file (0: given back), or None without one."""
    try:
        return int(path.read_text().strip() or 0)
    except FileNotFoundError:
        return None
    except ValueError:
        return 0


def _take(path: Path, pid: int) -> bool:
    """Create the claim file, or take it over from a process that is gone (the caller holds the lock)."""
    holder = _holder(path)
    if holder and process.alive(holder):  # None: no claim; 0: given back
        return False
    tmp = path.with_name(f".{path.name}.{pid}")
    tmp.write_text(f"{pid}\n")
    tmp.replace(path)
    return True


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def claim(preferred: int | None = None, directory: Path | None = None, pid: int | None = None) -> SlotClaim:
    """Claim a slot: `preferred` (the one this server's state used last time, its own stale claim included)
    unless a running server holds it; else an untouched slot, lowest first; else the stale claim (a killed
    server's, or one given back) left longest ago. A server whose slot is taken over meanwhile gets another
    one when it starts again."""
    directory = directory or claims_dir()
    directory.mkdir(parents=True, exist_ok=True)
    me = pid or os.getpid()
    paths = [directory / f"netslot-{index}" for index in range(SLOTS)]
    with _locked(directory):
        if preferred is not None and 0 <= preferred < SLOTS and _take(paths[preferred], me):
            return SlotClaim(NetSlot(preferred), paths[preferred])
        untouched = [i for i, path in enumerate(paths) if not path.exists()]
        stale = sorted(
            (i for i, path in enumerate(paths) if i not in untouched),
            key=lambda i: _mtime(paths[i]),
        )
        for index in [*untouched, *stale]:
            if _take(paths[index], me):
                return SlotClaim(NetSlot(index), paths[index])
    raise RuntimeError(
        f"all {SLOTS} local RunPod address slots in {directory} are held by running servers; "
        "stop some (scripts/local-runpod stop) or remove stale netslot-* files there"
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
