"""How a local server is started and waited for: its command line, a free port, the wait until it answers.
The servers `trainstack local-runpod` leaves running (localcloud/servers.py) and those a test starts as its
own children (harness/local.py) run the same commands."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def wait_until(
    check: Callable[[], Any], what: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None
) -> Any:
    """Poll `check()` until it returns something truthy (returned), `process` dies (RuntimeError), or
    `timeout_s` passes (TimeoutError). A readiness deadline only bounds how long a failed start takes to say
    so: a poll returns at the first right answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {process.returncode}")
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not ready after {timeout_s} s")


def _die_with_parent() -> None:
    """Linux only: SIGTERM this child when its parent dies, so a killed pytest leaves no servers behind."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


# For a server that is a child of its caller (a test's): it dies with it. Detached servers do not use it.
CHILD_SETUP = _die_with_parent if sys.platform == "linux" else None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def emulator_command(state_dir: Path, port: int, *args: str) -> list[str]:
    """`python -m emulator serve` on `port` (0: any) with its state in `state_dir`; `args`: serve flags."""
    return [
        sys.executable,
        "-m",
        "emulator",
        "serve",
        "--port",
        str(port),
        "--state-dir",
        str(state_dir),
        *args,
    ]


def moto_command(host: str, port: int, tls: tuple[Path, Path] | None, socket_timeout_s: float) -> list[str]:
    """localcloud/moto_server.py on `host:port`, over HTTPS with `tls` = (certificate, key)."""
    tls_args = ["-s", "-c", str(tls[0]), "-k", str(tls[1])] if tls else []
    return [
        sys.executable, "-m", "localcloud.moto_server", str(socket_timeout_s),
        "-H", host, "-p", str(port), *tls_args,
    ]  # fmt: skip
