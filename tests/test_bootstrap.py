"""scripts/up as root installs the nodes' torch venv in scripts/bootstrap's third background job (issue #43):
when that job fails, the bootstrap stops with the job's own reason and scripts/up refuses before it starts
the local RunPod or rents anything.

The cache is a throwaway one holding the built CLI and uv (linked file by file, as the cold-cache demo test
does), so nothing is built or downloaded; what makes the torch job fail is a plain directory where
scripts/bootstrap-torch keeps its link, which it refuses to replace."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common.cachedir import cache_dir

pytestmark = pytest.mark.root  # scripts/up installs the torch venv only as root

REPO = Path(__file__).resolve().parents[1]
REUSED = ("pulumi-cli-*", "pulumi-v*", "uv-*")


def _cache_with_the_builds(tmp: Path) -> Path:
    real = cache_dir()
    cache = tmp / "cache"
    cache.mkdir()
    for pattern in REUSED:
        for path in real.glob(pattern):
            if not path.is_dir() or path.is_symlink():
                continue
            for src in path.rglob("*"):
                dst = cache / src.relative_to(real)
                if src.is_dir() and not src.is_symlink():
                    dst.mkdir(parents=True, exist_ok=True)
                elif src.name != "uv" or "pulumi" not in path.name:  # bootstrap rewrites that link
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.symlink_to(src.resolve())
    if not any(cache.glob("pulumi-v*/bin/pulumi")):
        pytest.skip(f"no built Pulumi CLI in {real}: run scripts/bootstrap")
    return cache


def test_scripts_up_refuses_before_renting_when_the_torch_venv_cannot_be_installed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only then does scripts/up install the nodes' torch venv")
    cache = _cache_with_the_builds(tmp_path)
    (cache / "torch-venv").mkdir()  # not the link scripts/bootstrap-torch makes: it refuses to touch it
    state = tmp_path / "local-runpod"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "PULUMI_"))}
    env |= {
        "TRAINSTACK_CACHE": str(cache),
        "TRAINSTACK_STATE_DIR": str(state),
        # Its own backend: its own stack lock, never the one of a demo up running beside this test.
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}",
    }
    done = subprocess.run(
        [str(REPO / "scripts/up"), "dev"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "bootstrap: the nodes' torch venv (scripts/bootstrap-torch) could not be installed" in said
    assert "is a directory without torch" in said  # bootstrap-torch's own reason, from the job's log
    assert "nothing was created or rented" in said
    assert "targeting the local RunPod" not in said
    assert not state.exists()  # the local RunPod was never started


def test_a_jobs_status_is_read_whole_or_not_at_all(tmp_path: Path) -> None:
    """scripts/bootstrap's run_job, as it is in the script, with `echo` slowed down: its status file must not
    exist until its status is in it, or the loop that reads it as soon as it exists takes an empty status
    for a failure (seen on a loaded machine: "uv sync failed" after a sync that succeeded)."""
    text = (REPO / "scripts/bootstrap").read_text()
    start = text.index("run_job() {")
    run_job = text[start : text.index("\n}\n", start) + 3]
    script = f"""
set -euo pipefail
work={tmp_path}
jobs_started=()
echo() {{ sleep 0.5; builtin echo "$@"; }}  # the status is written slowly
ok() {{ true; }}
{run_job}
run_job ok ok
while [[ ! -f $work/ok.rc ]]; do sleep 0.01; done
builtin echo "status: [$(cat "$work/ok.rc")]"
"""
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "status: [0]", done.stdout
