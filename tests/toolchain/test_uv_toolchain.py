"""Our language host honours Pulumi's `toolchain: uv` runtime option, with the real CLI.

Pulumi's own uv toolchain (sdk/python/toolchain/uv.go) puts the virtualenv beside the nearest uv.lock when
the `virtualenv` option is unset, and installs with `uv sync`; ours does the same, syncing `--frozen`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common.cachedir import cache_dir
from harness.pulumi_cli import REPO, Pulumi

pytestmark = pytest.mark.e2e

PROGRAM = 'import os\nimport pulumi\n\npulumi.export("virtual_env", os.environ.get("VIRTUAL_ENV", ""))\n'
PYPROJECT = '[project]\nname = "uv-check"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = []\n'


def _project(directory: Path, toolchain: str) -> Path:
    """A one-line program in `directory`/program whose Pulumi.yaml names only the toolchain."""
    program = directory / "program"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text(
        f"name: uv-check\nruntime:\n  name: python\n  options:\n    toolchain: {toolchain}\n"
    )
    (program / "__main__.py").write_text(PROGRAM)
    return program


def _uv_dir() -> Path:
    """Where scripts/bootstrap put uv: linked beside the CLI, and in its own cache folder by version."""
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        if line.startswith("required-version"):
            version = line.split('"')[1].removeprefix("==")
            break
    else:
        raise AssertionError("pyproject.toml's [tool.uv] has no required-version")
    for directory in (cache_dir() / f"uv-{version}" / "bin", cache_dir() / "bin"):
        if (directory / "uv").exists():
            return directory
    raise AssertionError(f"uv {version} is not in {cache_dir()}: run scripts/bootstrap (it installs uv)")


def _offline_uv_env() -> dict[str, str]:
    # The test project has no dependencies, so nothing needs the network, and uv is told so.
    path = f"{cache_dir() / 'bin'}:{_uv_dir()}:{REPO / '.venv/bin'}:{os.environ.get('PATH', '')}"
    return {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1", "PATH": path}


def test_install_syncs_the_venv_beside_the_nearest_uv_lock(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    env = {**os.environ, **_offline_uv_env()}
    subprocess.run(["uv", "lock"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    program = _project(tmp_path, "uv")
    cli = Pulumi(project=program, state=tmp_path / "state", extra_env=_offline_uv_env())
    # PULUMI_RUNTIME_VIRTUALENV is the pip fallback; with uv the lock's directory decides.
    cli.extra_env["PULUMI_RUNTIME_VIRTUALENV"] = ""
    done = cli.run("install")
    assert (tmp_path / ".venv" / "bin" / "python").exists(), done.stdout + done.stderr
    assert not (program / ".venv").exists()


def test_install_without_a_lock_says_how_to_make_one(tmp_path: Path) -> None:
    program = _project(tmp_path, "uv")
    cli = Pulumi(project=program, state=tmp_path / "state", extra_env=_offline_uv_env())
    failed = cli.run("install", check=False)
    assert failed.returncode != 0
    assert "no uv.lock" in failed.stdout + failed.stderr and "uv lock" in failed.stdout + failed.stderr


def test_the_program_runs_in_the_venv_beside_the_lock(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "uv.lock").write_text("")  # only its place matters here
    (tmp_path / ".venv").symlink_to(REPO / ".venv")  # the repo's venv has pulumi
    cli = Pulumi(project=_project(tmp_path, "uv"), state=tmp_path / "state")
    # PULUMI_RUNTIME_VIRTUALENV (the repo's .venv, which the dynamic-provider host reads) is not what
    # decides for the program: with uv it runs in the .venv beside the lock, a different path.
    cli.stack_init("check")
    cli.run("up", "--yes", "--skip-preview")
    assert cli.run("stack", "output", "virtual_env").stdout.strip() == str(tmp_path / ".venv")


def test_an_unsupported_toolchain_is_named_with_the_fix(tmp_path: Path) -> None:
    cli = Pulumi(project=_project(tmp_path, "poetry"), state=tmp_path / "state")
    cli.stack_init("check")
    failed = cli.run("preview", check=False)
    assert failed.returncode != 0
    out = failed.stdout + failed.stderr
    assert 'toolchain: "poetry" is not supported' in out and 'use "uv" or "pip"' in out
