"""OpenSSH client calls (the `ssh`/`scp` binaries): batch mode, the stack's own known_hosts, bounded retries.

Exceptions: `DeliveryError` and `UnreachableError`, in the tree of providers/errors.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.backoff import Backoff
from providers import settings
from providers.errors import TrainstackError

KEY_ENV = "TRAINSTACK_SSH_KEY"  # private key path; never an input, so never in state
SSH_UNREACHABLE = 255  # ssh's own exit status for connection and authentication failures
_BACKOFF = Backoff(base_s=0.25, cap_s=8.0)  # a node whose sshd is starting: retry within seconds
STDERR_TAIL = 600  # characters of the remote's stderr kept in an error (our own script's output)

# argv, stdin, timeout -> completed process; tests pass a fake, production runs the real binaries.
Runner = Callable[[Sequence[str], bytes | None, float], "subprocess.CompletedProcess[bytes]"]


class DeliveryError(TrainstackError):
    """A delivery step failed; the node keeps whatever it had before this step."""


class UnreachableError(DeliveryError):
    """ssh never connected (network, sshd not up, key refused) before the deadline."""


def run_process(
    argv: Sequence[str], stdin: bytes | None, timeout_s: float
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(list(argv), input=stdin, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        # A hung connection counts as unreachable: retried like a refused one.
        return subprocess.CompletedProcess(list(argv), SSH_UNREACHABLE, b"", b"timed out")


def forget_host_key(known_hosts: Path, alias: str) -> bool:
    """Drop `alias`'s host key from the stack's known_hosts (hashed entries too: `ssh-keygen -R`).

    A node's host key is pinned under its pod id. A pod stopped and started again is a new container with
    new host keys (RunPod wipes the container disk, where sshd keeps them), so a delivery that lets go of
    its node forgets the key, and the next delivery to that pod id learns the new one. Serialized with a
    lock beside the file: the deletes of a stack's nodes run at once, and each rewrites the file."""
    import fcntl

    if not known_hosts.is_file():
        return False
    with open(known_hosts.with_name(known_hosts.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            ["ssh-keygen", "-R", alias, "-f", str(known_hosts)], capture_output=True, timeout=30, check=False
        )
        known_hosts.with_name(known_hosts.name + ".old").unlink(missing_ok=True)  # ssh-keygen's backup
    return proc.returncode == 0


def private_key_path() -> Path | None:
    """`$TRAINSTACK_SSH_KEY`, else ssh's default identities (None: let ssh pick)."""
    path = settings.current().ssh_key
    if path is not None and not path.is_file():
        raise DeliveryError(
            f"{KEY_ENV}={path} is not a file; point it at the private key of the account's SSH key"
        )
    return path


DEFAULT_IDENTITIES = ("id_ed25519", "id_ecdsa", "id_rsa", "id_ed25519_sk", "id_ecdsa_sk", "id_dsa")


def key_available() -> bool:
    """Whether ssh has any key to offer: `$TRAINSTACK_SSH_KEY` as a file, an agent, or one of ssh's default
    identities. Without one no node can answer, which says nothing about the nodes."""
    path = settings.current().ssh_key
    if path is not None:
        return path.is_file()
    if os.environ.get("SSH_AUTH_SOCK"):
        return True
    return any((Path.home() / ".ssh" / name).is_file() for name in DEFAULT_IDENTITIES)


@dataclass(frozen=True)
class SshTarget:
    """One node as ssh sees it. `alias` keys its host key in known_hosts (the pod id: a replaced node at the
    same address is a new host, never a 'changed host key')."""

    host: str
    port: int
    user: str
    alias: str
    known_hosts: Path

    def options(self, connect_timeout_s: float) -> list[str]:
        opts = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "accept-new",
            "UserKnownHostsFile": str(self.known_hosts),
            "GlobalKnownHostsFile": "/dev/null",
            "HostKeyAlias": self.alias,
            "ConnectTimeout": str(max(1, round(connect_timeout_s))),
            "ServerAliveInterval": "5",
            "ServerAliveCountMax": "3",
            "LogLevel": "ERROR",
        }
        args = [f"-o{k}={v}" for k, v in opts.items()]
        key = private_key_path()
        if key is not None:
            args += ["-i", str(key), "-oIdentitiesOnly=yes"]
        return args


@dataclass(frozen=True)
class Ssh:
    """ssh/scp against one target, each call retried on connection failures until `deadline_s` passes."""

    target: SshTarget
    connect_timeout_s: float = 10.0
    deadline_s: float = 120.0
    step_timeout_s: float = 120.0
    runner: Runner = run_process
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def run(self, command: str, stdin: bytes | None = None) -> str:
        t = self.target
        argv = ["ssh", *t.options(self.connect_timeout_s), "-p", str(t.port), f"{t.user}@{t.host}", command]
        return self._retry(argv, stdin, "ssh").stdout.decode(errors="replace")

    def copy_dir(self, local: Path, remote: str) -> None:
        """Copy the contents of `local` into the (new) remote directory `remote`."""
        t = self.target
        argv = ["scp", "-q", "-r", *t.options(self.connect_timeout_s), "-P", str(t.port)]
        self._retry([*argv, str(local), f"{t.user}@{t.host}:{remote}"], None, "scp")

    def _retry(self, argv: list[str], stdin: bytes | None, what: str) -> subprocess.CompletedProcess[bytes]:
        t = self.target
        start, attempt = self.clock(), 0
        while True:
            attempt += 1
            proc = self.runner(argv, stdin, self.step_timeout_s)
            if proc.returncode == 0:
                return proc
            err = proc.stderr.decode(errors="replace").strip()[-STDERR_TAIL:]
            if proc.returncode != SSH_UNREACHABLE:
                raise DeliveryError(f"{what} on {t.user}@{t.host}:{t.port} exited {proc.returncode}: {err}")
            elapsed = self.clock() - start
            if elapsed >= self.deadline_s:
                raise UnreachableError(
                    f"{what} to {t.user}@{t.host}:{t.port} failed {attempt} times in {elapsed:.0f} s (last: "
                    f"{err or 'no message'}); check that the node runs sshd and accepts the key in ${KEY_ENV}"
                )
            # The chokepoint's backoff rule (common.backoff), shorter steps, never past the deadline.
            pause = _BACKOFF.delay(attempt)
            self.sleep(min(pause, max(0.0, self.deadline_s - elapsed)))
