"""Dynamic providers run under trainstack's host, which serves many RPCs at once (the stock host: 4)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from common.cachedir import cache_dir
from harness.pulumi_cli import REPO, Pulumi

pytestmark = pytest.mark.e2e

HOST_DIR = REPO / "tools/pulumi/dynhost"
# The host is a script installed beside the CLI, not a package module: load it from its file.
HOST_FILE = HOST_DIR / "trainstack_dynamic_host.py"
_spec = importlib.util.spec_from_file_location("trainstack_dynamic_host", HOST_FILE)
assert _spec is not None and _spec.loader is not None
host = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(host)

PARTIES = 12  # three times the stock host's pool of 4


def gate_stack(tmp_path: Path, parties: int, timeout_s: float, **env: str) -> Pulumi:
    project = tmp_path / "wide"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        "name: wide-check\n"
        "runtime:\n  name: python\n  options:\n    toolchain: pip\n"
        f"    virtualenv: {REPO / '.venv'}\n"
        f"main: {REPO / 'tests/toolchain/wide'}\n"
    )
    p = Pulumi(project=project, state=tmp_path / "state", extra_env={"PYTHONPATH": str(REPO), **env})
    p.stack_init("wide")
    p.run("config", "set", "gate:parties", str(parties))
    p.run("config", "set", "gate:timeout_s", str(timeout_s))
    return p


def test_bootstrap_installed_our_host_beside_the_cli() -> None:
    installed = cache_dir() / "bin"
    for name in ("pulumi-resource-pulumi-python", "trainstack_dynamic_host.py"):
        assert (installed / name).read_bytes() == (HOST_DIR / name).read_bytes(), name


def test_all_creates_run_at_once(tmp_path: Path) -> None:
    # Each create returns only when all 12 are in flight together; the stock host would deadlock on 4.
    p = gate_stack(tmp_path, PARTIES, timeout_s=120)
    up = p.run("up", "--yes", "--skip-preview", "--parallel", str(PARTIES * 2))
    assert f"+ {PARTIES + 1} created" in up.stdout, up.stdout


def test_a_narrow_pool_is_caught(tmp_path: Path) -> None:
    # The same program with the pool set back to the stock 4: the gate breaks and says so.
    p = gate_stack(tmp_path, 6, timeout_s=5, TRAINSTACK_PROVIDER_WORKERS="4")
    up = p.run("up", "--yes", "--skip-preview", "--parallel", "12", check=False)
    assert up.returncode != 0
    assert "creates had arrived when the barrier for 6 timed out" in up.stdout + up.stderr


@pytest.mark.parametrize("raw", ["0", "-3", "many", "5000"])
def test_bad_worker_count_names_the_variable_and_the_range(raw: str) -> None:
    with pytest.raises(SystemExit) as err:
        host.workers_from_env({host.ENV: raw})
    assert host.ENV in str(err.value) and "1 to 1024" in str(err.value)


def test_worker_count_default_and_override() -> None:
    assert host.workers_from_env({}) == host.DEFAULT_WORKERS
    assert host.workers_from_env({host.ENV: "16"}) == 16


def test_bad_worker_count_stops_the_host_with_the_message() -> None:
    env = {**os.environ, host.ENV: "zero", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [str(REPO / ".venv/bin/python"), str(HOST_FILE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert f"{host.ENV}='zero'" in proc.stderr


# --- preload: the program's Invoke that imports provider modules ahead of the first check -------------


def test_the_preload_function_is_one_string_in_program_host_and_language_host() -> None:
    from providers import preload

    go = (REPO / "tools/pulumi/langhost/main.go").read_text()
    assert host.PRELOAD_FUNCTION == preload.PRELOAD_FUNCTION
    assert host.MODULES_ARG == preload.MODULES_ARG
    assert f'const preloadFunction = "{preload.PRELOAD_FUNCTION}"' in go


def _invoke(tok: str, modules: list[str] | None = None) -> Any:
    from pulumi.runtime.proto import provider_pb2

    request = provider_pb2.InvokeRequest(tok=tok)
    if modules is not None:
        request.args.get_or_create_list(host.MODULES_ARG).extend(modules)
    return request


def test_preload_names_are_read_from_the_invoke_and_bad_ones_dropped() -> None:
    request = _invoke(host.PRELOAD_FUNCTION, ["providers.runpod.pod", "os; rm -rf", "", "a.b_c.d1"])
    assert host.preload_modules(request) == ["providers.runpod.pod", "a.b_c.d1"]
    assert host.preload_modules(_invoke(host.PRELOAD_FUNCTION)) == []


def test_preload_imports_in_order_and_skips_a_broken_module() -> None:
    imported: list[str] = []

    def importer(name: str) -> None:
        if name == "broken":
            raise ImportError("no module named broken")
        imported.append(name)

    loader = host.Preloader(importer)
    thread = loader.start(["a", "broken", "b"])
    assert thread is not None
    thread.join()
    assert imported == ["a", "b"]
    loader.before_call()  # returns at once: the preload is over


def test_a_provider_call_waits_for_the_preload_in_progress() -> None:
    # The import finishes only once the call is inside its wait, so the order below is fixed when the
    # call waits; a call that did not wait would log "check" first (and the import would give up).
    waiting = threading.Event()
    order: list[str] = []

    def importer(name: str) -> None:
        if waiting.wait(timeout=60):
            order.append(f"import {name}")

    loader = host.Preloader(importer)
    preload = loader.start(["providers.runpod.pod"])
    assert preload is not None
    idle_wait = loader._idle.wait

    def observed_wait(timeout: float | None = None) -> bool:
        waiting.set()
        return idle_wait(timeout)

    loader._idle.wait = observed_wait  # type: ignore[method-assign]

    def provider_call() -> None:
        loader.before_call()
        order.append("check")

    call = threading.Thread(target=provider_call)
    call.start()
    call.join()
    preload.join()
    assert order == ["import providers.runpod.pod", "check"]


def test_no_preload_once_a_provider_call_has_begun_or_when_nothing_is_asked() -> None:
    imported: list[str] = []
    loader = host.Preloader(imported.append)
    assert loader.start([]) is None  # the language host's early start names no modules
    loader.before_call()
    assert loader.start(["providers.runpod.pod"]) is None  # the call imports what it needs itself
    assert imported == []


class _FakeServicer:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def Invoke(self, request: Any, context: Any) -> str:
        self.calls.append(f"stock invoke {request.tok}")
        return "stock"

    def __getattr__(self, name: str) -> Any:
        if name not in host.PROVIDER_CALLS:
            raise AttributeError(name)
        return lambda request, context: self.calls.append(name) or name


def test_the_host_answers_preload_itself_and_passes_other_invokes_on() -> None:
    registered: list[Any] = []
    grpc_module = SimpleNamespace(add_ResourceProviderServicer_to_server=lambda s, srv: registered.append(s))
    imported: list[str] = []
    loader = host.Preloader(imported.append)
    host.serve_preload(grpc_module, lambda: "preload answer", loader)
    servicer = _FakeServicer()
    grpc_module.add_ResourceProviderServicer_to_server(servicer, "server")
    assert registered == [servicer]

    assert servicer.Invoke(_invoke(host.PRELOAD_FUNCTION, ["m1", "m2"]), None) == "preload answer"
    assert servicer.Invoke(_invoke("other:index:fn"), None) == "stock"
    assert servicer.Check(None, None) == "Check"  # waits for the preload, then the stock method
    assert imported == ["m1", "m2"]
    assert servicer.calls == ["stock invoke other:index:fn", "Check"]


def preload_stack(tmp_path: Path, **env: str) -> tuple[Pulumi, Path]:
    project = tmp_path / "preload"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        "name: preload-check\n"
        "runtime:\n  name: python\n  options:\n    toolchain: pip\n"
        f"    virtualenv: {REPO / '.venv'}\n"
        f"main: {REPO / 'tests/toolchain/preload'}\n"
    )
    probe = tmp_path / "probe.log"
    extra = {"PYTHONPATH": str(REPO), "PRELOAD_PROBE_FILE": str(probe), **env}
    p = Pulumi(project=project, state=tmp_path / "state", extra_env=extra)
    p.stack_init("preload")
    return p, probe


def test_the_program_preloads_modules_in_the_provider_before_its_check(tmp_path: Path) -> None:
    p, probe = preload_stack(tmp_path)
    preview = p.run("preview", "--logtostderr", "-v=5")
    (imported, checked) = probe.read_text().splitlines()
    pid = imported.split()[1]
    assert imported == f"import {pid} preload"  # on the host's preload thread
    assert checked == f"check {pid} True"  # the same provider process, module already there
    # The language host started the provider before the program ran (an Invoke with no modules), and
    # nothing of either Invoke reaches the user's output.
    assert f"Invoke received: tok={host.PRELOAD_FUNCTION} #args=0" in preview.stderr
    assert f"Invoke received: tok={host.PRELOAD_FUNCTION} #args=1" in preview.stderr
    assert "trainstackPreload" not in preview.stdout
    assert "error" not in preview.stdout.lower()


def test_the_early_start_can_be_turned_off(tmp_path: Path) -> None:
    p, probe = preload_stack(tmp_path, TRAINSTACK_EARLY_PROVIDER="0")
    preview = p.run("preview", "--logtostderr", "-v=5")
    assert f"tok={host.PRELOAD_FUNCTION} #args=0" not in preview.stderr
    assert f"tok={host.PRELOAD_FUNCTION} #args=1" in preview.stderr
    assert probe.read_text().splitlines()[1].endswith(" True")


def test_under_pulumis_stock_host_the_preload_is_refused_quietly(tmp_path: Path) -> None:
    # A user on Pulumi's own `pulumi-resource-pulumi-python` (python -m pulumi.dynamic): it answers the
    # Invoke "not implemented"; the program ignores that, nothing reaches the output, the check still runs.
    stock_dir = tmp_path / "stock"
    stock_dir.mkdir()
    stock = stock_dir / "pulumi-resource-pulumi-python"
    stock.write_text(f'#!/bin/sh\nexec {REPO / ".venv/bin/python"} -u -m pulumi.dynamic "$@"\n')
    stock.chmod(0o755)
    p, probe = preload_stack(tmp_path)
    p.extra_env["PATH"] = f"{stock_dir}:{p.env()['PATH']}"
    preview = p.run("preview")
    assert f"from $PATH at {stock}" in preview.stdout  # the engine did run the stock host
    assert "trainstackPreload" not in preview.stdout + preview.stderr
    assert "Invoke" not in preview.stdout + preview.stderr
    (checked,) = probe.read_text().splitlines()  # no preload line: the stock host imported nothing ahead
    assert checked.startswith("check ") and checked.endswith(" False")
