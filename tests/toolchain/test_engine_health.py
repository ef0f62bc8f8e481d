"""Our language host and dynamic-provider host exit once the engine that started them is gone (issue 24.13).

Each host is started as the engine starts it (the engine's address as the positional argument) against a
stand-in engine: a gRPC server whose health service counts the checks. While it answers, the host serves on;
once it stops, the host exits by itself. A test that times out kills the CLI's whole process tree.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from harness.pulumi_cli import REPO, descendants, run_killing_tree

pytestmark = pytest.mark.services

DYNHOST = REPO / "tools/pulumi/dynhost/trainstack_dynamic_host.py"
CHECK_S = "0.1"
EXIT_DEADLINE_S = 60.0


@dataclass
class FakeEngine:
    """A gRPC server with only `grpc.health.v1.Health/Check`, answering SERVING-or-nothing (empty message)."""

    server: Any
    address: str
    checks: int = 0
    _seen: threading.Condition = field(default_factory=threading.Condition)

    def wait_for_checks(self, n: int, timeout_s: float = 60) -> None:
        with self._seen:
            assert self._seen.wait_for(lambda: self.checks >= n, timeout_s), f"{self.checks} checks < {n}"

    def check(self, _request: bytes, _context: Any) -> bytes:
        with self._seen:
            self.checks += 1
            self._seen.notify_all()
        return b""


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    port = server.add_insecure_port("127.0.0.1:0")
    fake = FakeEngine(server, f"127.0.0.1:{port}")
    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(fake.check)}
    )
    server.add_generic_rpc_handlers((handler,))
    server.start()
    yield fake
    server.stop(0)


def _start(argv: list[str], engine: FakeEngine, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """The host as the engine starts it: its engine's address last, in a process group of its own (the
    engine's RegisterProcessGroup); with `sigint_ignored`, as a job that `nohup cmd &` started is."""
    env = {**os.environ, "TRAINSTACK_ENGINE_CHECK_S": CHECK_S, "PYTHONPATH": str(REPO)}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    proc = subprocess.Popen(
        [*argv, engine.address], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        process_group=0, preexec_fn=ignore,
    )  # fmt: skip
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()  # a plugin prints its port once it serves
    assert port.isdigit(), f"no port from {argv[0]}: {port!r} {proc.stderr.read() if proc.stderr else ''}"
    return proc


def _outlives_then_follows(proc: subprocess.Popen[str], engine: FakeEngine, says: str) -> None:
    try:
        engine.wait_for_checks(3)  # the host asks, the engine answers: it keeps serving
        assert proc.poll() is None, "the host exited while the engine was answering"
        engine.server.stop(0)  # the engine dies (as after a kill -9 of `pulumi`)
        _, stderr = proc.communicate(timeout=EXIT_DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert says in stderr


def test_the_dynamic_provider_host_exits_when_the_engine_goes_away(engine: FakeEngine) -> None:
    proc = _start([str(REPO / ".venv/bin/python"), str(DYNHOST)], engine)
    _outlives_then_follows(proc, engine, "the engine at " + engine.address + " is gone")


def test_the_host_exits_even_when_its_stderr_died_with_the_engine(engine: FakeEngine) -> None:
    # The engine reads a plugin's stderr through a pipe: once it is killed, the host's farewell line raises
    # BrokenPipeError. Found by killing a real `pulumi preview` (the host outlived it); it must exit anyway.
    proc = _start([str(REPO / ".venv/bin/python"), str(DYNHOST)], engine)
    try:
        engine.wait_for_checks(3)
        assert proc.stderr is not None
        proc.stderr.close()  # the read end goes away with the engine
        engine.server.stop(0)
        assert proc.wait(timeout=EXIT_DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def langhost(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The language host built from this checkout's source (the installed one may be another checkout's)."""
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build tools/pulumi/langhost (scripts/bootstrap needs it too)")
    binary = tmp_path_factory.mktemp("langhost") / "pulumi-language-python"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    # scripts/bootstrap's own flags: its build left every package compiled in Go's build cache, so this
    # build only links. With other flags (other build tags) it compiled gRPC and the Pulumi SDK again: 120
    # CPU-s on a machine whose Go cache held only bootstrap's build (issue #47).
    flags = re.search(r"^go_flags=\((.*)\)$", (REPO / "scripts/bootstrap").read_text(), re.M)
    assert flags is not None, "scripts/bootstrap sets go_flags=(...) for its builds"
    subprocess.run(
        ["go", "build", *shlex.split(flags.group(1)), "-o", str(binary), "./langhost"],
        cwd=REPO / "tools/pulumi", env=env, check=True, timeout=900,
    )  # fmt: skip
    return binary


def test_the_language_host_exits_when_the_engine_goes_away(engine: FakeEngine, langhost: Path) -> None:
    proc = _start([str(langhost)], engine)
    _outlives_then_follows(proc, engine, "the engine at " + engine.address + " is gone")


@pytest.mark.parametrize("host", ["dynamic-provider host", "language host"])
def test_a_host_started_with_sigint_ignored_still_stops_on_the_engines_interrupt(
    host: str, engine: FakeEngine, request: pytest.FixtureRequest
) -> None:
    """The engine stops a plugin with SIGINT to its process group and kills it 5 s later (the Go SDK's
    resource/plugin/plugin.go). Started with SIGINT ignored, which exec keeps, neither host stopped on it:
    every close waited the 5 s (issue #47: ~230 closes a CI run that was started in the background). The
    engine answers throughout, so only the interrupt can end the host here."""
    if host == "language host":
        argv = [str(request.getfixturevalue("langhost"))]
    else:
        argv = [str(REPO / ".venv/bin/python"), str(DYNHOST)]
    proc = _start(argv, engine, sigint_ignored=True)
    try:
        engine.wait_for_checks(2)  # serving, its engine answering
        os.killpg(proc.pid, signal.SIGINT)  # as the engine's plugin Close does
        proc.wait(timeout=EXIT_DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"the {host} started with SIGINT ignored did not stop on SIGINT")
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""  # stopped, as asked


@pytest.mark.parametrize("raw", ["0", "nan", "soon", "7200"])
def test_a_bad_check_interval_names_the_variable(raw: str, engine: FakeEngine) -> None:
    env = {**os.environ, "TRAINSTACK_ENGINE_CHECK_S": raw, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [str(REPO / ".venv/bin/python"), str(DYNHOST), engine.address],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"TRAINSTACK_ENGINE_CHECK_S={raw!r}" in proc.stderr and "0.05 to 3600" in proc.stderr


def test_a_timed_out_command_takes_its_whole_tree_with_it(tmp_path: Path) -> None:
    # A parent that starts a child in a session of its own (as Pulumi starts its plugins) and then hangs.
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, pathlib\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " start_new_session=True)\n"
        f"pathlib.Path({str(pidfile)!r}).write_text(str(child.pid))\n"
        "child.wait()\n"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_killing_tree([sys.executable, "-c", script], timeout=15)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + EXIT_DEADLINE_S
    while _running(child):  # SIGKILL was sent; wait for the kernel to reap it (reparented to init)
        assert time.monotonic() < deadline, f"pid {child} outlived the timed-out command"
        time.sleep(0.05)
    assert child not in descendants(os.getpid())


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
