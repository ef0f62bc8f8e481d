"""scripts/up, recover, preview-report: local vs real from the target URL; one `up` per stack at a time."""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.workspace import targets_local
from tests.locks import stack_lock

pytestmark = [pytest.mark.serial, pytest.mark.services]

REPO = Path(__file__).resolve().parents[2]
LOCAL_ENV = {"RUNPOD_API_KEY": "local-runpod-key", "RUNPOD_API_URL": "http://127.0.0.1:40123"}


def _targets_local(**env: str) -> bool:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "TRAINSTACK_LOCAL"))}
    # A file backend of its own: neither the local demo's (refused with a real target) nor a shared one
    # (refused with the local one); tests/ops/test_target.py holds those refusals.
    return targets_local({**clean, "PULUMI_BACKEND_URL": "file:///tmp/a-backend-of-its-own", **env})


@pytest.mark.parametrize(
    ("env", "local"),
    [
        # What `eval "$(scripts/local-runpod start)"` exports: a key AND a loopback URL. Local.
        (LOCAL_ENV, True),
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "http://localhost:8080/"}, True),
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "http://[::1]:8080"}, True),
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "http://127.8.9.10"}, True),
        ({}, True),  # nothing set: scripts/up starts the local RunPod
        ({"RUNPOD_API_KEY": "k"}, False),  # a key and no URL: https://api.runpod.io
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "https://api.runpod.io"}, False),
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "http://127.0.0.1.example.com:80"}, False),
        ({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": "http://10.0.0.5:8080"}, False),
        ({"RUNPOD_API_KEY": "k", "TRAINSTACK_LOCAL": "1"}, True),
    ],
)
def test_target_is_decided_by_the_url(env: dict[str, str], local: bool) -> None:
    assert _targets_local(**env) is local


def test_recover_with_the_local_env_never_uses_the_repo_as_workspace() -> None:
    """With the README's env line, recover used to run `pulumi refresh` on the repo's own stack files."""
    stack = "no-such-stack-issue24"
    done = subprocess.run(
        [str(REPO / "scripts/recover"), stack, "--yes"],
        env={**os.environ, **LOCAL_ENV},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"no Pulumi project at {REPO}/.state/local/{stack}" in done.stderr


@pytest.fixture
def held_lock() -> Iterator[Path]:
    """The lock a first `scripts/up dev` holds while it runs."""
    path = stack_lock("dev", {**os.environ, **LOCAL_ENV})  # the env the up below runs with
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.truncate(0)
        f.write("4242\n")
        f.flush()
        yield path
        fcntl.flock(f, fcntl.LOCK_UN)


def _tree(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} if root.exists() else {}


def test_a_second_up_of_a_stack_is_refused_without_touching_the_first(held_lock: Path) -> None:
    watched = [REPO / ".state/local/dev", REPO / "stacks"]
    before = [_tree(w) for w in watched]
    done = subprocess.run(
        [str(REPO / "scripts/up"), "dev"],
        env={**os.environ, **LOCAL_ENV},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "another scripts/up of 'dev' is running here (pid 4242)" in done.stderr
    assert [_tree(w) for w in watched] == before
    assert held_lock.read_text() == "4242\n"


@pytest.mark.parametrize("flag", ["--skip-preview", "-f"])
def test_up_refuses_to_skip_the_preview(flag: str) -> None:
    """Issue #34: under --skip-preview the pack's budget checks would run only after the pods exist."""
    watched = [REPO / ".state/local/dev", REPO / "stacks"]
    before = [_tree(w) for w in watched]
    done = subprocess.run(
        [str(REPO / "scripts/up"), "dev", "--yes", flag],
        env={**os.environ, **LOCAL_ENV}, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"refusing {flag}" in done.stderr
    assert [_tree(w) for w in watched] == before


def test_recover_refuses_while_an_up_is_running(held_lock: Path, tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: python\n")
    done = subprocess.run(
        [str(REPO / "scripts/recover"), "dev", "--yes", "--cwd", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 3 and "a scripts/up of 'dev' is still running here (pid 4242)" in done.stderr


def test_up_against_the_real_runpod_shows_the_cost_and_asks_or_wants_yes(tmp_path: Path) -> None:
    """No terminal to ask on and no --yes: the cost line, then a refusal, before any stack is selected."""
    state = tmp_path / "state"
    state.mkdir()
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "TRAINSTACK_LOCAL", "PULUMI_"))
    }
    env = clean | {
        "RUNPOD_API_KEY": "not-a-real-key",
        "RUNPOD_API_URL": "https://api.runpod.invalid",
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": "test",
    }
    proc = subprocess.run(
        [str(REPO / "scripts/up"), "prod"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        "scripts/up: 'prod' costs $255.63/h; one run $3,859.29 (forecast: 15.1 h of training)" in proc.stderr
    )
    assert "pass --yes to apply without asking" in proc.stderr
    assert not any(state.rglob("*.json")), "a stack was created"
