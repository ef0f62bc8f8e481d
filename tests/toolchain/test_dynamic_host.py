"""Dynamic providers run under trainstack's host, which serves many RPCs at once (the stock host: 4)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from providers.cachedir import cache_dir
from tests.support.pulumi_cli import REPO, Pulumi

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
