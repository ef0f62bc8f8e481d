"""Linux plumbing for emulated hosts: a bridge, one network namespace per pod joined to it by a veth pair.

Everything here shells out to iproute2 (`ip`), needs root, and touches only names it is given: the bridge
the caller names and namespaces/veths derived from the names it passes. Nothing here knows about pods.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

IP_TIMEOUT_S = 10.0  # one `ip` command; they take milliseconds unless the kernel is wedged


class HostNetError(RuntimeError):
    """An `ip` command failed; the message carries the command and its stderr (never secrets)."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    if check and proc.returncode != 0:
        raise HostNetError(f"ip {' '.join(args)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (not root, no iproute2, no sshd), or None when they can."""
    if os.geteuid() != 0:
        return "not running as root (network namespaces need root)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if ip("netns", "list", check=False).returncode != 0:
        return "`ip netns` does not work on this kernel"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "OpenSSH's sshd is not installed (scripts/bootstrap installs openssh-server as root)"
    return None


@dataclass(frozen=True)
class Bridge:
    """A Linux bridge with one host-side address (`cidr`, e.g. 10.250.0.1/24) that hosts reach."""

    name: str
    cidr: str

    @property
    def host_ip(self) -> str:
        return str(ipaddress.ip_interface(self.cidr).ip)

    def exists(self) -> bool:
        return ip("link", "show", "dev", self.name, check=False).returncode == 0

    def create(self) -> None:
        ip("link", "add", self.name, "type", "bridge")
        ip("addr", "add", self.cidr, "dev", self.name)
        ip("link", "set", self.name, "up")

    def remove(self) -> None:
        if self.exists():
            ip("link", "del", self.name)

    def add_address(self, cidr: str) -> None:
        """Add a gateway address (idempotent); refuse one whose subnet another interface already routes."""
        net = ipaddress.ip_interface(cidr).network
        listing = ip("-o", "-4", "addr", "show").stdout.split("\n")
        for line in listing:
            fields = line.split()
            if len(fields) < 4:
                continue
            iface, addr = fields[1], ipaddress.ip_interface(fields[3])
            if addr.network.overlaps(net):
                if iface == self.name and str(addr) == cidr:
                    return
                raise HostNetError(
                    f"subnet {net} is already on {iface} ({addr}); another emulator's hosts? If no local "
                    f"RunPod or test run uses {iface} (a killed run leaves its bridge), delete it: "
                    f"ip link del {iface}"
                )
        ip("addr", "add", cidr, "dev", self.name)

    def remove_address(self, cidr: str) -> None:
        ip("addr", "del", cidr, "dev", self.name, check=False)

    def extra_addresses(self) -> list[str]:
        """The IPv4 addresses on the bridge besides its own `cidr` (cluster gateways), CIDR form."""
        listing = ip("-o", "-4", "addr", "show", "dev", self.name, check=False).stdout.split("\n")
        found = [fields[3] for fields in (line.split() for line in listing) if len(fields) >= 4]
        return [cidr for cidr in found if cidr != self.cidr]


def veth_name(namespace: str) -> str:
    """A host-side veth name derived from the namespace (IFNAMSIZ allows 15 characters)."""
    return "tsv" + hashlib.sha256(namespace.encode()).hexdigest()[:10]


def create_namespace(name: str, bridge: Bridge, iface: str, address: str, gateway: str) -> None:
    """A namespace whose `iface` holds `address` (CIDR form) on the bridge, default route via `gateway`."""
    ip("netns", "add", name)
    try:
        veth = veth_name(name)
        ip("link", "add", veth, "type", "veth", "peer", "name", iface, "netns", name)
        ip("link", "set", veth, "master", bridge.name, "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("-n", name, "addr", "add", address, "dev", iface)
        ip("-n", name, "link", "set", iface, "up")
        ip("-n", name, "route", "add", "default", "via", gateway)
    except HostNetError:
        delete_namespace(name)
        raise


def namespace_pids(name: str) -> list[int]:
    out = ip("netns", "pids", name, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_namespace(name: str, sig: int = signal.SIGKILL, timeout_s: float = 5.0) -> None:
    """Send `sig` to every process in the namespace; for SIGKILL, wait (bounded) until none is left."""
    deadline = time.monotonic() + timeout_s
    while pids := namespace_pids(name):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig != signal.SIGKILL or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def delete_namespace(name: str) -> None:
    """Kill what runs inside, then delete the namespace (its veth pair goes with it). Idempotent."""
    if name not in list_namespaces(""):
        return
    kill_namespace(name)
    ip("netns", "del", name, check=False)


def list_namespaces(prefix: str) -> list[str]:
    out = ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix)]
