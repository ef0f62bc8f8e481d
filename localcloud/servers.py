"""The local RunPod (emulator) and a moto S3 server on loopback, left running between commands:
`trainstack local-runpod start|stop|status|env` (docs/CLI.md).

State (pids, ports, SQLite, logs) lives in $TRAINSTACK_STATE_DIR (default: .state/local-runpod in the repo).
Extra serve flags for the emulator may be passed in LOCAL_RUNPOD_ARGS (e.g. "--offer-spot --time-scale 10").
As root (with sshd installed) RUNNING pods become emulated hosts (emulator/hosts.py): moto then listens on
the hosts' bridge (the server's own, 10.250.N.1; emulator/netslot.py) so nodes reach it, and a local SSH key
(state dir, ssh/id_ed25519) is accepted by every node; `env` exports TRAINSTACK_SSH_KEY.
LOCAL_RUNPOD_ARGS="--hosts off" keeps it control-plane only. moto serves HTTPS (localcloud/moto_server.py)
with a certificate made here for its address (state dir, s3/s3.crt): the checkpoint bucket's TLS-only policy
is as strict as on AWS, and the nodes and the providers trust it through AWS_CA_BUNDLE.
Stable endpoints per checkout: each server gets the port it had last time when that port is free
(LOCAL_RUNPOD_PORT forces the emulator's). The emulator keeps its state (SQLite) across restarts; moto keeps
nothing. `env` exports TRAINSTACK_LOCAL_BOOT, which changes whenever either server was (re)started: `up`
refreshes a stack when it differs from the one the stack's last `up` saw.
The servers run through localcloud/processes.py's commands, the same ones the tests start (harness/local.py).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from common import process
from common.cachedir import cache_dir
from common.errors import TrainstackError
from emulator.keys import DEFAULT_API_KEY
from localcloud.processes import REPO, emulator_command, free_port, moto_command, wait_until

NAMES = ("emulator", "moto")
# How long a start may take before it is called failed (30 s stretched by the tests' deadline scale, 3, as
# it was when these servers ran through the harness's wait).
READY_S = 90.0
STOP_S = 30.0


class LocalRunPodError(TrainstackError):
    """A local server did not start; the message names its log."""


def demo_node_env(env: Mapping[str, str]) -> list[str]:
    """The demo's training on emulated hosts (each overridable from the environment): ~5 minutes of a tiny
    MLP (train/train.py) a run, a checkpoint every 100 steps, synced to the bucket every 30 s; the all-reduce
    and disk floors of a real H100 node mean nothing on a veth bridge and a laptop disk."""
    return [
        "TRAINSTACK_DEVICE=cpu",
        "TRAINSTACK_CPU_PROCS_PER_NODE=1",
        # One intra-op thread per node: torch's default, a thread per core on each emulated node, spins
        # through every step's sleep (13x the CPU of the tiny MLP's steps; docs/PERFORMANCE.md).
        f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', '1')}",
        f"TRAINSTACK_STEPS={env.get('TRAINSTACK_STEPS', '3000')}",
        f"TRAINSTACK_STEP_SLEEP_S={env.get('TRAINSTACK_STEP_SLEEP_S', '0.1')}",
        f"TRAINSTACK_CHECKPOINT_EVERY={env.get('TRAINSTACK_CHECKPOINT_EVERY', '100')}",
        f"TRAINSTACK_LOG_EVERY={env.get('TRAINSTACK_LOG_EVERY', '50')}",
        f"TRAINSTACK_CHECKPOINT_INTERVAL_S={env.get('TRAINSTACK_CHECKPOINT_INTERVAL_S', '30')}",
        "TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S=0.001",
        "TRAINSTACK_MIN_FREE_DISK_GB=1",
        # An emulated host's /root is this machine's, shared by every pod: /workspace is the pod's own disk.
        "TRAINSTACK_CHECKPOINT_DIR=/workspace/checkpoints",
    ]


@dataclass(frozen=True)
class Servers:
    """The two servers' state folder and the key the emulator takes: always the local RunPod's own
    (emulator/keys.py), never a RUNPOD_API_KEY of the shell, which may be the team's real key: `start` and
    `env` print the key they export (issue #62)."""

    state: Path
    key: str = DEFAULT_API_KEY

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Servers:
        return cls(Path(env.get("TRAINSTACK_STATE_DIR") or REPO / ".state" / "local-runpod"))

    def _file(self, name: str) -> Path:
        return self.state / name

    def pid(self, name: str) -> int | None:
        try:
            return int(self._file(f"{name}.pid").read_text())
        except (OSError, ValueError):
            return None

    def alive(self, name: str) -> bool:
        pid = self.pid(name)
        return pid is not None and process.alive(pid)

    def _last_port(self, name: str, host: str) -> int:
        """The port `name` had last time on `host` when it is free now, else 0. Free as the servers see it:
        they bind with SO_REUSEADDR: their last run's connections in TIME_WAIT do not make it look taken."""
        try:
            last = self._file(f"{name}.last").read_text().strip()
            port = int(last.removeprefix(f"{host}:")) if last.startswith(f"{host}:") else 0
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except (OSError, ValueError):
            return 0
        return port

    def _new_boot(self, name: str) -> None:
        self._file(f"{name}.boot").write_text(uuid.uuid4().hex[:12] + "\n")

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Started on its own, detached (it outlives this command), its output appended to its log."""
        with self._file(f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                argv, cwd=REPO, env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self._file(f"{name}.pid").write_text(f"{process.pid}\n")
        return process

    def _wait(self, check: Callable[[], object], name: str, process: subprocess.Popen[bytes]) -> None:
        try:
            wait_until(check, f"local-runpod: the {name}", READY_S, process)
        except (RuntimeError, TimeoutError) as exc:
            raise LocalRunPodError(f"{exc}; see {self._file(f'{name}.log')}") from None

    def start_emulator(self, env: Mapping[str, str]) -> None:
        if self.alive("emulator"):
            return
        from emulator import spec_download

        try:  # RunPod's REST v2 spec: beside the repo or in the cache, else downloaded (pinned, checked)
            spec_download.ensure()
        except spec_download.SpecUnavailable as exc:
            raise LocalRunPodError(f"local-runpod: {exc}") from None
        marker = self.state / "emulator" / "server.json"
        marker.unlink(missing_ok=True)
        child = {**_without_shell_keys(env), "PYTHONPATH": str(REPO), "RUNPOD_API_KEY": self.key}
        if shutil.which("ssh-keygen"):
            key = self.state / "ssh" / "id_ed25519"
            if not key.is_file():
                key.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "trainstack-local-runpod",
                     "-f", str(key)],
                    check=True,
                )  # fmt: skip
            child["TRAINSTACK_SSH_PUBLIC_KEY"] = f"{key}.pub"
        hosts_env: list[str] = []
        torch_venv = cache_dir(env) / "torch-venv" / "bin"
        if (torch_venv / "torchrun").exists():  # the nodes' "image": the torch venv (scripts/bootstrap-torch)
            child["TRAINSTACK_NODE_PATH"] = str(torch_venv)
            # Login dotfiles (pyenv's shims) may put another python3 first on a node's PATH: name it outright.
            hosts_env.append(f"TRAINSTACK_PYTHON={torch_venv / 'python'}")
        hosts_env += [f"AWS_CA_BUNDLE={self.state / 's3' / 's3.crt'}", *demo_node_env(env)]
        port = int(env.get("LOCAL_RUNPOD_PORT") or self._last_port("emulator", "127.0.0.1"))
        args = shlex.split(env.get("LOCAL_RUNPOD_ARGS", ""))
        for setting in hosts_env:
            args += ["--hosts-env", setting]
        process = self._spawn("emulator", emulator_command(self.state / "emulator", port, *args), child)
        self._wait(lambda: marker.is_file() and json.loads(marker.read_text()), "emulator", process)
        port = int(json.loads(marker.read_text())["port"])
        self._file("emulator.port").write_text(f"{port}\n")
        self._file("emulator.last").write_text(f"127.0.0.1:{port}\n")
        self._new_boot("emulator")
        self._wait(lambda: _answers(f"http://127.0.0.1:{port}/_admin/health"), "emulator", process)

    def _emulator_url(self) -> str:
        return f"http://127.0.0.1:{self._file('emulator.port').read_text().strip()}"

    def hosts_ip(self) -> str:
        """The bridge address nodes reach when the emulator runs hosts; '' when control-plane only."""
        import httpx  # here: `scripts/local-runpod env` and `status` make no request (issue #47)

        health = httpx.get(f"{self._emulator_url()}/_admin/health", timeout=10).json()
        return str((health.get("hosts") or {}).get("hostIp") or "")

    def _certificate(self, host: str) -> tuple[Path, Path]:
        """A self-signed certificate for moto at `host` (and loopback), made again when `host` changed."""
        folder = self.state / "s3"
        folder.mkdir(parents=True, exist_ok=True)
        cert, key, made_for = folder / "s3.crt", folder / "s3.key", folder / "host"
        if not (cert.is_file() and made_for.is_file() and made_for.read_text().strip() == host):
            san = f"subjectAltName=IP:{host}" + ("" if host == "127.0.0.1" else ",IP:127.0.0.1")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes",
                 "-days", "3650", "-subj", "/CN=trainstack-local-s3", "-addext", san, "-keyout", str(key),
                 "-out", str(cert)],
                check=True, capture_output=True,
            )  # fmt: skip
            made_for.write_text(f"{host}\n")
        return cert, key

    def start_moto(self, env: Mapping[str, str]) -> None:
        if self.alive("moto"):
            return
        host = self.hosts_ip() or "127.0.0.1"
        port = self._last_port("moto", host) or free_port(host)  # the stack's S3 endpoint stays what it was
        cert, key = self._certificate(host)
        process = self._spawn(
            "moto",
            moto_command(host, port, (cert, key), 30),
            {**_without_shell_keys(env), "PYTHONPATH": str(REPO)},
        )
        self._file("moto.port").write_text(f"{host}:{port}\n")
        self._file("moto.last").write_text(f"{host}:{port}\n")
        self._new_boot("moto")
        tls = ssl.create_default_context(cafile=str(cert))
        self._wait(lambda: _answers(f"https://{host}:{port}/moto-api/", tls), "moto", process)

    def start(self, env: Mapping[str, str]) -> dict[str, str]:
        self.state.mkdir(parents=True, exist_ok=True)
        self.start_emulator(env)
        self.start_moto(env)
        return self.env()

    def env(self) -> dict[str, str]:
        """What a shell exports to use the servers (`eval "$(scripts/local-runpod env)"`)."""
        moto_at = self._file("moto.port").read_text().strip()
        boots = [self._read(f"{name}.boot") for name in NAMES]
        exported = {
            "RUNPOD_API_URL": self._emulator_url(),
            "RUNPOD_API_KEY": self.key,
            "AWS_ENDPOINT_URL_S3": f"https://{moto_at}",
            "AWS_CA_BUNDLE": str(self.state / "s3" / "s3.crt"),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        if (self.state / "ssh" / "id_ed25519").is_file():
            exported["TRAINSTACK_SSH_KEY"] = str(self.state / "ssh" / "id_ed25519")
        exported["TRAINSTACK_LOCAL_BOOT"] = "-".join(boots)
        return exported

    def _read(self, name: str) -> str:
        try:
            return self._file(name).read_text().strip()
        except OSError:
            return ""

    def running(self) -> bool:
        return all(self.alive(name) for name in NAMES)

    def status(self) -> list[str]:
        lines = []
        for name in NAMES:
            if self.alive(name):
                lines.append(f"{name}: running (pid {self.pid(name)}, port {self._read(f'{name}.port')})")
            else:
                lines.append(f"{name}: stopped")
        return lines

    def stop(self) -> None:
        for name in NAMES:
            pid = self.pid(name)
            if pid is not None and self.alive(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                with contextlib.suppress(TimeoutError, RuntimeError):
                    wait_until(functools.partial(_gone, pid), f"{name} stopping", STOP_S)
            self._file(f"{name}.pid").unlink(missing_ok=True)
            self._file(f"{name}.port").unlink(missing_ok=True)


def _gone(pid: int) -> bool:
    return not _exists(pid)


def _without_shell_keys(env: Mapping[str, str]) -> dict[str, str]:
    """The shell's environment for a server, less the RunPod address and keys it names (maybe the team's)."""
    return {
        k: v for k, v in env.items() if not k.startswith("RUNPOD_API_") and k != "RUNPOD_READ_ONLY_API_KEY"
    }


def _exists(pid: int) -> bool:
    if not process.alive(pid):
        return False
    # A child of ours that exited is a zombie until reaped: reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    return True


def _answers(url: str, verify: ssl.SSLContext | bool = True) -> bool:
    import httpx

    try:
        httpx.get(url, timeout=2, verify=verify)
    except httpx.TransportError:
        return False
    return True
