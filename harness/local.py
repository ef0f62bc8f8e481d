"""A local RunPod (and a moto S3) as children of a test or a benchmark, and the admin API that drives
them; the servers and their commands are the product's (localcloud/)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.keys import DEFAULT_API_KEY
from harness.deadlines import scaled
from localcloud.processes import CHILD_SETUP, REPO, emulator_command, free_port, moto_command, wait_until

if TYPE_CHECKING:  # httpx is imported where a request is made
    import httpx

# Fast enough that a pod is ready within ~1.5 s of wall time, slow enough to see every phase.
FAST_ARGS = (
    "--provisioning-s",
    "0.5",
    "--starting-s",
    "0.5",
    "--runtime-lag-s",
    "0.25",
    "--rate-per-minute",
    "100000",
    # RunPod's GraphQL retired (410 Gone, docs/RUNPOD-CONTRACT.md): every e2e path must run on REST v2 alone.
    # A test that needs it (spot, the migration of older secrets) passes `--graphql on` after these.
    "--graphql",
    "gone",
)


def _wait(check: Any, what: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> Any:
    """localcloud's wait with `timeout_s` stretched by harness/deadlines.py: a busy CI machine must not turn a
    test's slow start into a failure."""
    return wait_until(check, what, scaled(timeout_s), process)


@dataclass
class Admin:
    """The `/_admin` API of one server; every method returns the decoded JSON answer."""

    client: httpx.Client

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.client.request(method, f"/_admin{path}", json=body)
        response.raise_for_status()
        return response.json()

    def reset(self) -> None:
        self._call("POST", "/reset")

    def faults(self, **config: Any) -> dict[str, Any]:
        """Replace the fault set: errorRate, errorNext, errorStatus, latencyMs, dropNext, loseNext, match*."""
        result: dict[str, Any] = self._call("PUT", "/faults", config)
        return result

    def capacity(self, **config: Any) -> dict[str, Any]:
        """Replace capacity faults: exhaustNext (int), exhausted (bool), stock ({"gpu@dc": GPUs})."""
        result: dict[str, Any] = self._call("PUT", "/capacity", config)
        return result

    def limits(self, **changes: Any) -> dict[str, Any]:
        """Change spendLimit, balance, ratePerMinute or offerSpot; returns all limits."""
        result: dict[str, Any] = self._call("PATCH", "/limits", changes)
        return result

    def now(self) -> float:
        """The emulator's clock (scaled wall time plus every `advance`)."""
        now: float = self._call("GET", "/clock")["now"]
        return now

    def advance(self, seconds: float) -> float:
        now: float = self._call("POST", "/clock/advance", {"seconds": seconds})["now"]
        return now

    def preempt(self, pod_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/pods/{pod_id}/preempt")
        return result

    def out_of_band(self, pod_id: str, status: str = "TERMINATED") -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/pods/{pod_id}/out-of-band", {"status": status})
        return result

    def audit(self, since: int = 0) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self._call("GET", f"/audit?since={since}")["entries"]
        return entries

    def counters(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/counters")
        return result

    def requests_reach(self, total: int, timeout_s: float = 1.0) -> bool:
        """Wait on the server (one long-polled call, no spinning) until it has counted `total` API requests
        since the last reset, at most `timeout_s`; True if it has."""
        response = self.client.get(
            "/_admin/counters/wait", params={"total": total, "timeoutS": timeout_s}, timeout=timeout_s + 30
        )
        response.raise_for_status()
        return bool(response.json()["reached"])

    def hosts(self) -> dict[str, Any]:
        """Emulated hosts: `enabled`, `mode`, `reason`, `bridge`, `hosts` (pod id, namespace, ip)."""
        result: dict[str, Any] = self._call("GET", "/hosts")
        return result

    def live(self) -> dict[str, Any]:
        """Live pods/clusters/volumes/secrets, `spendPerHour`, and `duplicates` (names held twice)."""
        result: dict[str, Any] = self._call("GET", "/live")
        return result


@dataclass
class LocalRunPod:
    """A running emulator: where it listens, its key, its admin API, and how to stop it."""

    base_url: str
    api_key: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    admin: Admin = field(init=False)

    def __post_init__(self) -> None:
        import httpx

        # A kept-alive connection idle for 2 s is not reused: the server (uvicorn) closes one idle for 5 s,
        # httpx's default expiry is 5 s too, and a request sent on a connection as the server closed it
        # was reset (`Connection reset by peer` on GET /_admin/counters in a CI run).
        limits = httpx.Limits(keepalive_expiry=2.0)
        self.admin = Admin(httpx.Client(base_url=self.base_url, timeout=10, limits=limits))

    def env(self) -> dict[str, str]:
        return {"RUNPOD_API_URL": self.base_url, "RUNPOD_API_KEY": self.api_key}

    def client(self, **kwargs: Any) -> httpx.Client:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=10, **kwargs)

    def stop(self) -> None:
        self.admin.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_local_runpod(
    state_dir: Path, *args: str, api_key: str = DEFAULT_API_KEY, timeout_s: float = 30.0
) -> LocalRunPod:
    """Start `python -m emulator serve` on a free loopback port; extra `args` are serve flags.

    Control-plane only unless `args` choose `--hosts` (emulated hosts are for the tests that need them)."""
    if "--hosts" not in args:
        args = (*args, "--hosts", "off")
    state_dir.mkdir(parents=True, exist_ok=True)
    marker = state_dir / "server.json"
    marker.unlink(missing_ok=True)
    env = os.environ | {"RUNPOD_API_KEY": api_key}
    command = emulator_command(state_dir, 0, *args)
    with (state_dir / "emulator.log").open("ab") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=CHILD_SETUP
        )
    info = _wait(
        lambda: marker.exists() and json.loads(marker.read_text()), "local RunPod", timeout_s, process
    )
    server = LocalRunPod(info["baseUrl"], api_key, state_dir, process)
    import httpx

    def healthy() -> bool:
        try:
            return server.admin.client.get("/_admin/health").status_code == 200
        except httpx.TransportError:
            return False

    _wait(healthy, "local RunPod health", timeout_s, process)
    return server


@dataclass
class MotoS3:
    """A moto server standing in for S3; use `endpoint_url` with the `testing` credentials."""

    endpoint_url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        # moto's server turns SIGTERM into sys.exit, and the threaded server then joins its request threads
        # on the way out: one waiting on a quiet client's socket holds the exit for up to the socket timeout
        # (30 s), past this wait. What it held is a test's teardown, so it is killed then.
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_moto_s3(
    log_path: Path,
    timeout_s: float = 60.0,
    attempts: int = 3,
    host: str = "127.0.0.1",
    tls: tuple[Path, Path] | None = None,
    socket_timeout_s: float = 30.0,
) -> MotoS3:
    """Start moto on a free port of `host` (loopback, or a bridge address of our own for emulated hosts),
    over HTTPS with `tls` = (certificate, key); moto cannot pick its own port, so a port taken meanwhile
    means a new try. `socket_timeout_s`: how long one socket of the server may wait for its peer. The server
    is localcloud/moto_server.py: moto with bucket policy conditions evaluated per request (the TLS-only Deny
    refuses plain HTTP and lets HTTPS through, as on AWS)."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_moto_once(log_path, timeout_s, host, tls, socket_timeout_s)
        except RuntimeError:  # the server exited, most likely because the port was taken
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_moto_once(
    log_path: Path, timeout_s: float, host: str, tls: tuple[Path, Path] | None, socket_timeout_s: float
) -> MotoS3:
    port = free_port(host)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            moto_command(host, port, tls, socket_timeout_s),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=CHILD_SETUP,
        )
    url = f"{'https' if tls else 'http'}://{host}:{port}"
    import httpx

    def healthy() -> bool:
        try:
            # httpx deprecates a CA path as `verify`; it takes an SSL context
            verify: Any = ssl.create_default_context(cafile=str(tls[0])) if tls else True
            return httpx.get(f"{url}/moto-api/", timeout=2, verify=verify).status_code < 500
        except httpx.TransportError:
            return False

    try:
        _wait(healthy, "moto S3", timeout_s, process)
    except TimeoutError:
        process.terminate()
        raise
    return MotoS3(url, process)
