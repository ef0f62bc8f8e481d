"""Emulated hosts: with root, each RUNNING pod becomes a machine one can SSH into; without, none exist.

The world calls one interface (`Hosts`) whenever pod state may have changed, with the full list of hosts it
wants (`HostSpec`, one per RUNNING pod). Two implementations:

- `ControlPlaneOnly`: the API alone; `reason` says why (not root, no sshd, or `--hosts off`).
- `NamespaceHosts`: per pod a network namespace on one bridge (cluster members on their cluster's CIDR with
  the fabric interface named `ens1`, as on RunPod), an OpenSSH server accepting the account's keys, RunPod's
  variables in the login environment, and a private mount namespace in which `/workspace` is the network
  volume's directory (shared by the cluster) and `/etc/hosts` and `/etc/resolv.conf` are the pod's own, with
  no DNS server configured. /tmp and the rest of the file system are the host's. A pod leaving RUNNING
  takes its processes and namespace with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from emulator import hostnet, slurm
from emulator.hostnet import Bridge, HostNetError
from emulator.netslot import SlotClaim

log = logging.getLogger("emulator.hosts")

SSH_PORT = 22
SSHD = "/usr/sbin/sshd"
SSHD_READY_S = 10.0  # a fresh sshd listens within milliseconds; this bounds a wedged one
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A container's own mounts: /workspace from the volume, its hosts file and (empty) resolver config. /tmp
# stays the host's: the emulator's state (sshd config, keys) may live there, and must stay visible.
# The hostname is the pod id (as in a RunPod container), resolvable through the pod's own hosts file.
_MOUNTS = (
    'mkdir -p "$2" && mount --bind "$1" "$2" && mount --bind "$3" /etc/hosts && '
    'mount --bind "$4" /etc/resolv.conf && hostname "$5" && shift 5 && exec "$@"'
)


@dataclass(frozen=True)
class HostSpec:
    """One host the world wants; `address` is in CIDR form (10.64.1.2/24)."""

    pod_id: str
    address: str  # the pod's private/fabric address on its subnet
    gateway: str  # the host side of that subnet (.1), the node's default route
    iface: str  # "ens1" for Instant Cluster members (RunPod's fabric name), "eth0" for loose pods
    volume_id: str | None  # network volume shared at `mount_path`; None: the pod's own container disk
    mount_path: str  # where the volume (or container disk) appears, /workspace by default
    env: Mapping[str, str]  # RunPod's injected variables and the pod's env, secret references filled in
    start_ssh: bool  # the pod asked for an SSH server (`startSsh`)
    slurm: slurm.SlurmNode | None = None  # a member of a `type: SLURM` cluster runs Slurm's daemons

    @property
    def ip(self) -> str:
        return str(ipaddress.ip_interface(self.address).ip)

    @property
    def gateway_cidr(self) -> str:
        prefix = ipaddress.ip_interface(self.address).network.prefixlen
        return f"{self.gateway}/{prefix}"


class Hosts(Protocol):
    """What the world needs from a host backend; `sync` is idempotent and never raises for one pod."""

    enabled: bool

    def describe(self) -> dict[str, Any]:
        """The admin API's `hosts` field: enabled, reason, bridge, live hosts."""
        ...

    def sync(self, wanted: Sequence[HostSpec], volumes: Collection[str], keys: Sequence[str]) -> None:
        """Create hosts for new specs, remove hosts no longer wanted, drop data of deleted volumes."""
        ...

    def endpoint(self, pod_id: str) -> tuple[str, int] | None:
        """Where the pod's SSH server listens, once its host is up."""
        ...

    def failure(self, pod_id: str) -> str | None:
        """Why the pod's host could not be made (the world then shows the pod as ERROR), else None."""
        ...

    def signal(self, pod_id: str, sig: int) -> None:
        """Signal every process of the pod except its SSH server (a spot notice's SIGTERM)."""
        ...

    def close(self) -> None:
        """Remove every host (the emulator is stopping)."""
        ...


@dataclass
class ControlPlaneOnly:
    """No hosts: pods exist in the API only, and the admin API says why."""

    reason: str
    enabled: bool = False

    def describe(self) -> dict[str, Any]:
        return {"enabled": False, "mode": "control-plane only", "reason": self.reason, "hosts": []}

    def sync(self, wanted: Sequence[HostSpec], volumes: Collection[str], keys: Sequence[str]) -> None:
        return None

    def endpoint(self, pod_id: str) -> tuple[str, int] | None:
        return None

    def failure(self, pod_id: str) -> str | None:
        return None

    def signal(self, pod_id: str, sig: int) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class _Host:
    spec: HostSpec
    namespace: str
    directory: Path
    process: subprocess.Popen[bytes]


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _setenv_word(name: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{name}={escaped}"'


@dataclass
class NamespaceHosts:
    """Hosts as network namespaces on `bridge`; state (keys, configs, volumes) under `state_dir`."""

    state_dir: Path
    bridge: Bridge
    node_path: Sequence[str] = ()  # prepended to PATH in logins (what the "image" puts on PATH)
    node_env: Mapping[str, str] = field(default_factory=dict)  # extra login env (the "image's" ENV)
    extra_keys: Sequence[str] = ()  # public keys accepted besides the account's (local demo)
    slot_claim: SlotClaim | None = None  # this server's address slot, given back on close
    enabled: bool = True
    _hosts: dict[str, _Host] = field(default_factory=dict)
    _failed: dict[str, str] = field(default_factory=dict)
    _gateways: dict[str, int] = field(default_factory=dict)
    _own_bridge: bool = False

    def __post_init__(self) -> None:
        self.prefix = f"ts-{self.bridge.name}-"
        for stale in hostnet.list_namespaces(self.prefix):  # left by an emulator that was killed
            hostnet.delete_namespace(stale)
        if not self.bridge.exists():
            self.bridge.create()
            self._own_bridge = True
        elif self.slot_claim is not None and self.bridge.name == self.slot_claim.slot.bridge_name:
            # The slot's own bridge, left by a server of this slot that was killed (the claim was stale): its
            # cluster gateways are that server's, and would make a new cluster of ours on the same subnet
            # look configured (or hide a subnet another interface holds). Hosts are made again by sync.
            for stale in self.bridge.extra_addresses():
                self.bridge.remove_address(stale)
                log.warning("hosts: removed %s from %s, a killed local RunPod's", stale, self.bridge.name)
            self._own_bridge = True
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        log.warning("hosts: on; pods become namespaces on bridge %s (%s)", self.bridge.name, self.bridge.cidr)

    def describe(self) -> dict[str, Any]:
        live = [
            {"podId": h.spec.pod_id, "namespace": h.namespace, "ip": h.spec.ip, "iface": h.spec.iface}
            for h in self._hosts.values()
        ]
        failed = [{"podId": pod, "error": why} for pod, why in self._failed.items()]
        return {
            "enabled": True,
            "mode": "hosts",
            "reason": None,
            "bridge": self.bridge.name,
            "hostIp": self.bridge.host_ip,
            "hosts": live,
            "failed": failed,
        }

    def sync(self, wanted: Sequence[HostSpec], volumes: Collection[str], keys: Sequence[str]) -> None:
        by_id = {s.pod_id: s for s in wanted}
        for pod_id in [p for p in self._hosts if p not in by_id]:
            self._remove(pod_id)
        for pod_id in [p for p in self._failed if p not in by_id]:
            del self._failed[pod_id]
        for spec in wanted:
            if spec.pod_id in self._hosts or spec.pod_id in self._failed:
                continue
            try:
                self._create(spec, [*keys, *self.extra_keys])
            except (HostNetError, OSError, TimeoutError, subprocess.SubprocessError) as exc:
                self._failed[spec.pod_id] = str(exc)
                log.error("hosts: pod %s has no host: %s", spec.pod_id, exc)
        self._drop_deleted_volumes(volumes)
        slurm.forget_cluster(self.state_dir, [s.slurm.cluster_id for s in wanted if s.slurm is not None])

    def endpoint(self, pod_id: str) -> tuple[str, int] | None:
        host = self._hosts.get(pod_id)
        return (host.spec.ip, SSH_PORT) if host is not None else None

    def failure(self, pod_id: str) -> str | None:
        return self._failed.get(pod_id)

    def signal(self, pod_id: str, sig: int) -> None:
        host = self._hosts.get(pod_id)
        if host is None:
            return
        for pid in hostnet.namespace_pids(host.namespace):
            if pid != host.process.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def close(self) -> None:
        for pod_id in list(self._hosts):
            self._remove(pod_id)
        if self._own_bridge:
            self.bridge.remove()
        if self.slot_claim is not None:
            self.slot_claim.release()

    # -- one host ---------------------------------------------------------------------------------

    def _create(self, spec: HostSpec, keys: Sequence[str]) -> None:
        directory = self.state_dir / "hosts" / spec.pod_id
        directory.mkdir(parents=True, exist_ok=True)
        workspace = self._workspace(spec, directory)
        (directory / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost\n{spec.ip}\t{spec.pod_id}\n")
        (directory / "resolv.conf").write_text("# emulated host: no DNS server; names come from /etc/hosts\n")
        namespace = self.prefix + spec.pod_id
        if spec.gateway_cidr not in self._gateways:
            self.bridge.add_address(spec.gateway_cidr)
        self._gateways[spec.gateway_cidr] = self._gateways.get(spec.gateway_cidr, 0) + 1
        try:
            hostnet.create_namespace(namespace, self.bridge, spec.iface, spec.address, spec.gateway)
            command = self._sshd(spec, directory, keys) if spec.start_ssh else ["sleep", "infinity"]
            if spec.slurm is not None:
                points, prefix = slurm.prepare_node(self.state_dir, spec.slurm, spec.pod_id)
                for point in points:
                    Path(point).mkdir(parents=True, exist_ok=True)
                command = [*prefix, *command]
            mounts = [str(workspace), spec.mount_path, str(directory / "hosts")]
            mounts += [str(directory / "resolv.conf"), spec.pod_id]
            enter = ["ip", "netns", "exec", namespace, "unshare", "--uts", "/bin/sh", "-c", _MOUNTS, "sh"]
            with (directory / "host.log").open("ab") as out:
                process = subprocess.Popen(
                    [*enter, *mounts, *command],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            self._hosts[spec.pod_id] = _Host(spec, namespace, directory, process)
            if spec.start_ssh:
                self._wait_listening(spec.ip, process, directory)
        except BaseException:
            self._remove(spec.pod_id, spec)
            raise
        log.info("hosts: pod %s is up at %s (%s) in %s", spec.pod_id, spec.ip, spec.iface, namespace)

    def _workspace(self, spec: HostSpec, directory: Path) -> Path:
        if spec.volume_id is not None:
            path = self.state_dir / "volumes" / spec.volume_id
        else:
            path = directory / "container-disk"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _sshd(self, spec: HostSpec, directory: Path, keys: Sequence[str]) -> list[str]:
        host_key = directory / "ssh_host_ed25519_key"
        if not host_key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", spec.pod_id, "-f", str(host_key)],
                check=True,
                capture_output=True,
                timeout=30,
            )
        (directory / "authorized_keys").write_text("".join(f"{k.strip()}\n" for k in keys))
        env = dict(spec.env) | dict(self.node_env)
        env["PATH"] = ":".join([*self.node_path, DEFAULT_PATH])
        env["HOME"] = "/root"
        lines = [
            f"ListenAddress {spec.ip}:{SSH_PORT}",
            f"HostKey {host_key}",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            f"PidFile {directory / 'sshd.pid'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # The state dir may sit under a world-writable /tmp; the files themselves are root's.
            "StrictModes no",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",
            # One line: sshd honours only the first SetEnv directive.
            "SetEnv " + " ".join(_setenv_word(k, v) for k, v in sorted(env.items()) if "\n" not in v),
        ]
        config = directory / "sshd_config"
        config.write_text("\n".join(lines) + "\n")
        return [SSHD, "-D", "-e", "-f", str(config)]

    def _wait_listening(self, ip: str, process: subprocess.Popen[bytes], directory: Path) -> None:
        deadline = time.monotonic() + SSHD_READY_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = (directory / "host.log").read_text(errors="replace").strip().splitlines()[-3:]
                raise HostNetError(f"sshd exited with {process.returncode}: {' | '.join(tail)}")
            try:
                with socket.create_connection((ip, SSH_PORT), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError(f"sshd on {ip} did not listen within {SSHD_READY_S} s")

    def _remove(self, pod_id: str, spec: HostSpec | None = None) -> None:
        host = self._hosts.pop(pod_id, None)
        spec = host.spec if host is not None else spec
        if spec is None:
            return
        hostnet.delete_namespace(self.prefix + pod_id)
        if host is not None:
            try:
                host.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                host.process.kill()
                host.process.wait()
        count = self._gateways.get(spec.gateway_cidr, 0) - 1
        if count <= 0:
            self._gateways.pop(spec.gateway_cidr, None)
            self.bridge.remove_address(spec.gateway_cidr)
        else:
            self._gateways[spec.gateway_cidr] = count
        shutil.rmtree(self.state_dir / "hosts" / pod_id, ignore_errors=True)
        log.info("hosts: pod %s is gone (processes killed, namespace removed)", pod_id)

    def _drop_deleted_volumes(self, volumes: Collection[str]) -> None:
        root = self.state_dir / "volumes"
        if not root.is_dir():
            return
        for path in root.iterdir():
            in_use = any(h.spec.volume_id == path.name for h in self._hosts.values())
            if path.name not in volumes and not in_use:
                shutil.rmtree(path, ignore_errors=True)


def hosts_unavailable(mode: str) -> str | None:
    """Why a server in `mode` makes no hosts, or None when it does."""
    return "hosts are off (--hosts off)" if mode == "off" else hostnet.unavailable_reason()


def make_hosts(
    mode: str,
    state_dir: Path,
    bridge: Bridge,
    node_path: Sequence[str] = (),
    node_env: Mapping[str, str] | None = None,
    extra_keys: Sequence[str] = (),
    slot_claim: SlotClaim | None = None,
) -> Hosts:
    """`mode` on|off|auto: auto means hosts when this process can make them, control plane otherwise."""
    why = hosts_unavailable(mode)
    if why is None:
        return NamespaceHosts(
            state_dir, bridge, tuple(node_path), dict(node_env or {}), tuple(extra_keys), slot_claim
        )
    if mode == "on":
        raise SystemExit(f"--hosts on, but {why}")
    hosts = ControlPlaneOnly(why)
    log.warning("hosts: off, the local RunPod is control-plane only: %s", hosts.describe()["reason"])
    return hosts
