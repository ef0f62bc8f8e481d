"""`--help` and `-h` on every script print its usage and do nothing else (issue #33).

"Nothing else" is checked where it can be seen: no file appears or changes in .state/, out/ or .venv/bin
(bootstrap, up, the local RunPod and the benchmarks all write there), nothing is printed to stderr, and it
exits 0 within seconds. scripts/test's --help belongs to the test lanes (issue #31).

Each script runs from a mirror of the repo (every top-level entry a symlink, but no .state/ or out/), so
what it would write lands in the mirror's own .state/ and out/, where no other test of the parallel lane
writes: a `scripts/up` beside this test cannot make it fail, and a script that does write still does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Sourced, not run (env.sh, help.sh); run by python by path (*.py); scripts/test: #31.
SKIPPED = {"env.sh", "help.sh", "test", "__init__.py"}
SCRIPTS = sorted(
    p.name
    for p in (REPO / "scripts").iterdir()
    if p.is_file() and p.name not in SKIPPED and p.suffix != ".py"
)
WATCHED = (".state", "out", ".venv/bin")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo as the scripts see it, without its .state/ and out/ (they would be created here)."""
    root = tmp_path_factory.mktemp("repo")
    for entry in REPO.iterdir():
        if entry.name not in (".state", "out", ".git"):
            (root / entry.name).symlink_to(entry)
    return root


def _tree(repo: Path) -> dict[str, float]:
    seen: dict[str, float] = {}
    for top in WATCHED:
        root = repo / top
        if root.is_dir():
            for p in root.rglob("*"):
                try:
                    seen[str(p)] = p.lstat().st_mtime
                except OSError:
                    continue
    return seen


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_usage_and_does_nothing_else(script: str, flag: str, mirror: Path) -> None:
    before = _tree(mirror)
    # No local RunPod address and no key: a script that went on would start the local RunPod (writing .state).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_"))}
    proc = subprocess.run(
        ["bash", str(mirror / "scripts" / script), flag],
        cwd=mirror, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr
    assert "usage" in proc.stdout.lower() or f"scripts/{script}" in proc.stdout, proc.stdout
    assert len(proc.stdout.splitlines()) >= 1
    assert _tree(mirror) == before, f"scripts/{script} {flag} changed files under {WATCHED}"


@pytest.mark.e2e  # runs the pulumi CLI through scripts/pulumi
def test_scripts_pulumi_works_in_a_fresh_shell() -> None:
    """README's `scripts/pulumi config set --secret ...` needs nothing sourced: no pulumi on PATH here."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    proc = subprocess.run(
        [str(REPO / "scripts/pulumi"), "version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("v3.")
