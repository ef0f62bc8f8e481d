"""The addresses one local RunPod's hosts use, so that several coexist on one machine.

The demo's local RunPod (left running by `scripts/up`), the tests' own, and those of other checkouts all
make hosts on the same kernel, where one subnet can sit on one interface only. Each server that makes
hosts therefore claims a slot N (0-63) and keeps to its addresses:

- its bridge `tsbrN`, host address 10.250.N.1/24 (unless a bridge is named explicitly);
- Instant Cluster subnets 10.(64+N).x.0/24, one per cluster;
- loose pods' global-networking range 100.(65+N).0.0/16 (slot 0 is RunPod's own 100.65.0.0/16).

A claim is a file `netslot-N` holding the server's pid in /run/trainstack (`TRAINSTACK_NETSLOT_DIR`),
created exclusively; a file whose pid is gone (or 0: given back by a server that stopped) is a stale claim,
taken over by the server whose state used that slot, or by any once no slot is free. Without hosts no address
is ever configured, and every server uses slot 0.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
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
        """Leave the slot to no process (the claim file holds 0), not a free slot: like a killed server's
        stale claim, it is taken first by the state that used it (its `preferred`), by others only when no
        untouched slot is free, so a server stopped and started again gets its addresses back even while
        other servers start meanwhile (seen beside the parallel lane: the demo's server took the slot
        between a stop and a start)."""
        with contextlib.suppress(FileNotFoundError):
            if self.path.read_text().strip() == str(os.getpid()):
                self.path.write_text("0\n")


def _take(path: Path, pid: int, stale_too: bool = True) -> bool:
    """Create the claim file, or (`stale_too`) take it over from a process that is gone."""
    for _ in range(2 if stale_too else 1):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text().strip() or 0)
            except (FileNotFoundError, ValueError):
                holder = 0
            if not stale_too or (holder and process.alive(holder)):
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: its server was killed
            continue
        with os.fdopen(fd, "w") as out:
            out.write(f"{pid}\n")
        return True
    return False


def claim(preferred: int | None = None, directory: Path | None = None, pid: int | None = None) -> SlotClaim:
    """Claim a free slot, `preferred` first (the one this server's state used last time, its own stale claim
    included). A stale claim of another slot, a killed server's, is taken over only when no slot is free: that
    server's state asks for it first when it starts again, and gets its addresses back even while other
    servers start meanwhile."""
    directory = directory or claims_dir()
    directory.mkdir(parents=True, exist_ok=True)
    me = pid or os.getpid()
    if preferred is not None and 0 <= preferred < SLOTS:
        path = directory / f"netslot-{preferred}"
        if _take(path, me):
            return SlotClaim(NetSlot(preferred), path)
    for stale_too in (False, True):
        for index in range(SLOTS):
            path = directory / f"netslot-{index}"
            if _take(path, me, stale_too):
                return SlotClaim(NetSlot(index), path)
    raise RuntimeError(
        f"all {SLOTS} local RunPod address slots in {directory} are held by running servers; "
        "stop some (scripts/local-runpod stop) or remove stale netslot-* files there"
    )
