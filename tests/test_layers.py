"""The layering in pyproject.toml's import-linter contracts holds (no package imports tests/, the emulator
imports no provider code, policy/ imports only facts/, ...): the same check `lint-imports` runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.fail(
            "import-linter is not installed in this venv: run scripts/bootstrap (it is a dev dependency)"
        )
    run = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_a_broken_contract_is_caught(tmp_path: Path) -> None:
    """The check is real: a policy module importing a provider breaks the policy contract."""
    config = tmp_path / "layers.toml"
    config.write_text(
        '[tool.importlinter]\nroot_packages = ["policy", "providers"]\n'
        '[[tool.importlinter.contracts]]\nname = "policy imports no providers"\ntype = "forbidden"\n'
        'source_modules = ["policy"]\nforbidden_modules = ["providers"]\n'
    )
    probe = tmp_path / "src"
    (probe / "policy").mkdir(parents=True)
    (probe / "providers").mkdir()
    (probe / "policy" / "__init__.py").write_text("import providers.thing\n")
    (probe / "providers" / "__init__.py").write_text("")
    (probe / "providers" / "thing.py").write_text("")
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run(
        [str(lint), "--no-cache", "--config", str(config)],
        cwd=probe,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(probe), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 1 and "BROKEN" in run.stdout


def test_scripts_python_modules_stay_thin() -> None:
    """scripts/ holds entry points only (issue #21): features live in packages; no module here passes 60."""
    modules = sorted((REPO / "scripts").glob("*.py"))
    assert modules, "scripts/ has no Python module: the glob is wrong"
    long = {p.name: n for p in modules if (n := len(p.read_text().splitlines())) > 60}
    assert not long, f"move these modules' logic into a package (bench/, ops/, ...): {long}"
