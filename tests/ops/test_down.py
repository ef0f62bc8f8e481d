"""scripts/down: the way back from scripts/up — refuses while an up of the stack runs, says so when the stack
was never brought up, and stops the local RunPod and S3 once nothing is left there."""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.locks import stack_lock

pytestmark = [pytest.mark.serial, pytest.mark.services]

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "TRAINSTACK_LOCAL", "PULUMI_"))
    }
    return clean | {
        # A throwaway backend and local-RunPod state: nothing of the repo's own demo is touched.
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}",
        "PULUMI_CONFIG_PASSPHRASE": "test-only",
        "TRAINSTACK_STATE_DIR": str(tmp_path / "local-runpod"),
        "LOCAL_RUNPOD_ARGS": "--hosts off",
    }


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "backend").mkdir(exist_ok=True)
    return subprocess.run(
        [str(REPO / "scripts/down"), *args], cwd=REPO, env=_env(tmp_path), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def _local_runpod(tmp_path: Path, verb: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts/local-runpod"), verb], env=_env(tmp_path), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_an_unknown_stack_names_the_known_ones(tmp_path: Path) -> None:
    done = _run(tmp_path, "nosuchstack")
    assert done.returncode == 2 and "choose one of:" in done.stderr and "dev" in done.stderr


def test_a_stack_never_brought_up_is_nothing_to_take_down(tmp_path: Path) -> None:
    done = _run(tmp_path, "search")
    assert done.returncode == 0, done.stderr
    assert "'search' was never brought up locally; nothing to take down" in done.stderr


def test_with_nothing_left_the_local_services_are_stopped(tmp_path: Path) -> None:
    started = _local_runpod(tmp_path, "start")
    try:
        assert started.returncode == 0, started.stderr
        done = _run(tmp_path, "search")
        assert done.returncode == 0, done.stderr
        assert "nothing left on the local RunPod; stopped it and the S3 server" in done.stderr
        assert _local_runpod(tmp_path, "status").returncode == 3  # both stopped
    finally:
        _local_runpod(tmp_path, "stop")


@pytest.fixture
def up_running(tmp_path: Path) -> Iterator[None]:
    """The lock a running `scripts/up search` holds (one run with this test's backend)."""
    path = stack_lock("search", _env(tmp_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.truncate(0)
        f.write("4242\n")
        f.flush()
        yield
        fcntl.flock(f, fcntl.LOCK_UN)


def test_refused_while_an_up_of_the_stack_runs(tmp_path: Path, up_running: None) -> None:
    done = _run(tmp_path, "search")
    assert done.returncode == 3
    assert "a scripts/up of 'search' is running here (pid 4242)" in done.stderr
