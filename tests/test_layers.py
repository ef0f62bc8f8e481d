"""The layering in pyproject.toml's import-linter contracts holds (one layers contract over every package, no
package imports tests/, policy/ imports only facts/ and common/): the same check `lint-imports` runs, and it
can fail."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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


def _lint_probe(
    tmp_path: Path, imports: dict[str, str], modules: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """lint-imports with the repository's own contracts over empty packages of the same names, where
    `imports` maps a package to the import its __init__.py makes, `modules` a module's path to its text."""
    config = REPO / "pyproject.toml"
    packages = tomllib.loads(config.read_text())["tool"]["importlinter"]["root_packages"]
    probe = tmp_path / "src"
    for package in packages:
        (probe / package).mkdir(parents=True)
        (probe / package / "__init__.py").write_text(imports.get(package, ""))
    for path, text in (modules or {}).items():
        (probe / path).write_text(text)
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache", "--config", str(config)],
        cwd=probe,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(probe), "PATH": "/usr/bin:/bin"},
    )


def test_the_repositorys_own_contracts_allow_what_the_layers_allow(tmp_path: Path) -> None:
    allowed = {
        "report": "import ops\n",
        "components": "import forecast\n",
        "forecast": "import stackconfig\n",
        "stackconfig": "import train\n",
        "ops": "import localcloud\n",  # issue #64: the local cloud is the product's, below ops/ and harness/
        "harness": "import localcloud\n",
        "localcloud": "import emulator\n",
    }
    run = _lint_probe(tmp_path, allowed)  # siblings joined by ':', a layer below, the bottom layer
    assert run.returncode == 0 and "0 broken" in run.stdout, run.stdout[-3000:]


@pytest.mark.parametrize(
    ("imports", "broken"),
    [
        ({"stackconfig": "import components\n"}, "the layers of docs/ARCHITECTURE.md"),  # up a layer
        ({"forecast": "import harness\n"}, "the layers of docs/ARCHITECTURE.md"),  # independent siblings
        ({"providers": "import stackconfig\n"}, "the layers of docs/ARCHITECTURE.md"),
        ({"facts": "import common\n"}, "the layers of docs/ARCHITECTURE.md"),
        # issue #42: the supervisor reads a live stack through stackview/, never through watch/
        ({"supervisor": "import watch\n"}, "the layers of docs/ARCHITECTURE.md"),
        ({"stackview": "import ops\n"}, "the layers of docs/ARCHITECTURE.md"),
        ({"ops": "import harness\n"}, "the layers of docs/ARCHITECTURE.md"),  # issue #64: tools, not tests
        ({"localcloud": "import harness\n"}, "the layers of docs/ARCHITECTURE.md"),
        ({"ops": "import tests\n"}, "no package imports tests/"),
        ({"policy": "import train\n"}, "policy/ imports only facts/ and common/"),
        ({"forecast": "import providers\n"}, "forecast/ imports only facts/, stackconfig/ and common/"),
    ],
)
def test_the_repositorys_own_contracts_catch_a_wrong_import(
    tmp_path: Path, imports: dict[str, str], broken: str
) -> None:
    """The real contracts, not a copy: every package of root_packages, one import that breaks one rule."""
    run = _lint_probe(tmp_path / "broken", imports)
    assert run.returncode == 1, run.stdout[-3000:]
    verdicts = [line for line in run.stdout.splitlines() if line.endswith(("KEPT", "BROKEN"))]
    assert [v for v in verdicts if v.endswith("BROKEN")] == [f"{broken} BROKEN"], run.stdout[-3000:]


@pytest.mark.parametrize("package", ["stackconfig", "ops"])
def test_an_import_cycle_in_stackconfig_or_ops_is_caught(tmp_path: Path, package: str) -> None:
    """Issue #64: a section that imports the whole config back for its type (the seven-file circle that was)
    breaks the acyclic contract, TYPE_CHECKING or not; the same two modules one way only do not."""
    one_way = {f"{package}/config.py": f"from {package} import section\n", f"{package}/section.py": ""}
    assert _lint_probe(tmp_path / "one_way", {}, one_way).returncode == 0
    back = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {p}.config import Whole\n"
    cycle = {**one_way, f"{package}/section.py": back.format(p=package)}
    run = _lint_probe(tmp_path / "cycle", {}, cycle)
    assert run.returncode == 1 and f"No cycles are allowed in {package}." in run.stdout, run.stdout[-3000:]


def test_scripts_python_modules_stay_thin() -> None:
    """scripts/ holds entry points only (issue #21): features live in packages; no module here passes 60."""
    modules = sorted((REPO / "scripts").glob("*.py"))
    assert modules, "scripts/ has no Python module: the glob is wrong"
    long = {p.name: n for p in modules if (n := len(p.read_text().splitlines())) > 60}
    assert not long, f"move these modules' logic into a package (bench/, ops/, ...): {long}"


SHELL_LIMIT = 150  # lines of shell in scripts/, bootstrap apart (issue #46): the workflow is Python


def shell_lines(directory: Path) -> dict[str, int]:
    """Each shell file of `directory` but `bootstrap` -> its lines. A file that is neither shell (a bash
    shebang, or sourced: `# shellcheck shell=bash`) nor a Python module fails, so none escapes the count."""
    counted = {}
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.suffix != ".py"):
        if path.name == "bootstrap":
            continue
        lines = path.read_text().splitlines()
        first = lines[0] if lines else ""
        assert first == "#!/usr/bin/env bash" or first.startswith("# shellcheck shell="), (
            f"{path} is neither shell nor a Python module: it has no place in scripts/"
        )
        counted[path.name] = len(lines)
    return counted


def _over(directory: Path) -> str:
    counted = shell_lines(directory)
    total = sum(counted.values())
    largest = sorted(counted.items(), key=lambda kv: -kv[1])[:5]
    return (
        "" if total <= SHELL_LIMIT else f"{total} lines of shell (largest: {largest}); move logic into Python"
    )


def test_the_shell_in_scripts_stays_under_its_limit() -> None:
    counted = shell_lines(REPO / "scripts")
    assert {"up", "check", "env.sh", "bootstrap-torch"} <= counted.keys()  # the count sees them
    assert _over(REPO / "scripts") == ""


def test_the_shell_limit_can_fail(tmp_path: Path) -> None:
    (tmp_path / "bootstrap").write_text("#!/usr/bin/env bash\n" + ":\n" * 500)  # not counted, however long
    (tmp_path / "up").write_text((REPO / "scripts" / "up").read_text())  # 2 lines
    (tmp_path / "env.sh").write_text("# shellcheck shell=bash\n:\n")  # sourced: counted too
    (tmp_path / "cli.py").write_text("# not shell\n" * 200)
    assert _over(tmp_path) == ""
    (tmp_path / "long").write_text("#!/usr/bin/env bash\n" + ":\n" * SHELL_LIMIT)
    assert _over(tmp_path).startswith(f"{SHELL_LIMIT + 1 + 2 + 2} lines of shell")
    (tmp_path / "notes.txt").write_text("a note\n")
    with pytest.raises(AssertionError, match="neither shell nor a Python module"):
        shell_lines(tmp_path)
