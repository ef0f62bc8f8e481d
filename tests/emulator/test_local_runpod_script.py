"""scripts/local-runpod: start (idempotent) prints the env, status and env work, stop stops both."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.services

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local-runpod"


def run(state: Path, verb: str) -> subprocess.CompletedProcess[str]:
    # Control-plane only: emulated hosts (and moto on their bridge) are tests/hosts' business.
    env = os.environ | {"TRAINSTACK_STATE_DIR": str(state), "LOCAL_RUNPOD_ARGS": "--hosts off"}
    return subprocess.run(
        [str(SCRIPT), verb], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def exports(text: str) -> dict[str, str]:
    pairs = (
        line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export ")
    )
    return dict(pairs)


def test_start_status_env_stop(tmp_path: Path) -> None:
    try:
        started = run(tmp_path, "start")
        assert started.returncode == 0, started.stderr
        env = exports(started.stdout)
        assert env["AWS_ACCESS_KEY_ID"] == "testing" and env["RUNPOD_API_KEY"] == "local-runpod-key"
        assert exports(run(tmp_path, "start").stdout) == env  # idempotent: same servers
        assert run(tmp_path, "status").returncode == 0
        assert exports(run(tmp_path, "env").stdout) == env
        headers = {"Authorization": f"Bearer {env['RUNPOD_API_KEY']}"}
        assert httpx.get(f"{env['RUNPOD_API_URL']}/v2/pods", headers=headers).status_code == 200
        assert httpx.get(f"{env['AWS_ENDPOINT_URL_S3']}/").status_code == 200
    finally:
        assert run(tmp_path, "stop").returncode == 0
    assert run(tmp_path, "status").returncode == 3
    assert run(tmp_path, "stop").returncode == 0  # idempotent
