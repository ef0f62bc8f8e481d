"""A stack name is checked by one rule (common/stackname.py) before any command builds a path from it
(issue #49, class 4): every entry point that takes a stack name refuses a bad one with exit 2, a line that
names it (escaped) and the rule, no traceback, and nothing written."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.stackname import MAX_LENGTH, main, shown, stack_name_problem
from forecast import cli as forecast_cli
from report import cli as report_cli

REPO = Path(__file__).resolve().parents[2]
# Hostile and careless names: path walks, absolute paths, shell and terminal characters, Pulumi's own
# forms that are not ours (org/stack, upper case, '.', '_'), empty, too long, a leading '-'.
HOSTILE = [
    "../prod", "..", ".", "/etc", "dev/../prod", "a/b", "org/project/dev", "Dev", "dev_1", "dev.1", "",
    " dev", "dev ", "dev\nprod", "dev;rm -rf ~", "$(id)", "`id`", "dev\x1b[2J", "dév", "x" * (MAX_LENGTH + 1),
    "-dev", "dev\x00",
]  # fmt: skip
VALID = ["dev", "prod", "local-cpu", "dev-red", "0", "a" * MAX_LENGTH]
# The rule as the docs state it, written again here so the function is checked against words, not itself.
RULE = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_is_refused_with_the_rule(name: str) -> None:
    problem = stack_name_problem(name)
    assert problem is not None
    assert "not a valid stack name" in problem and "lowercase letters, digits and '-'" in problem
    assert "\n" not in problem and "\x1b" not in problem and "\x00" not in problem


@pytest.mark.parametrize("name", VALID)
def test_a_valid_name_passes(name: str) -> None:
    assert stack_name_problem(name) is None


@given(st.text(max_size=120))
def test_the_rule_over_generated_names(name: str) -> None:
    problem = stack_name_problem(name)
    assert (problem is None) == bool(RULE.fullmatch(name))
    if problem is not None:
        # the name only as its escaped literal: nothing of it outside the quotes
        rest = problem.removeprefix(f"stack {shown(name)}")
        assert problem.isprintable() and rest != problem and "/" not in rest


def test_the_module_entry_point_exits_2_with_a_line_per_bad_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scripts/x", "dev", "../prod", "Dev"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("scripts/x: stack ") for line in err)
    assert main(["scripts/x", "dev", "prod"]) == 0
    assert main(["scripts/x"]) == 2  # no name at all is bad use too


@pytest.mark.parametrize("name", ["../prod", "Dev", ""])
def test_forecast_and_preview_report_refuse_before_reading_a_file(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert forecast_cli.main([name, "--stacks-dir", str(tmp_path)]) == 2
    assert report_cli.main([name, "--recorded", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("not a valid stack name") == 2 and "Traceback" not in err


@pytest.mark.parametrize("name", ["../prod", "Dev", ""])
def test_the_supervisor_run_directly_refuses_before_reading_a_file(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`python -m supervisor` without its wrapper: the same rule, exit 2, before any path is built."""
    from supervisor import cli as supervisor_cli

    with pytest.raises(SystemExit) as ended:
        supervisor_cli.main([name, "--cwd", str(tmp_path / "none"), "--once"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "not a valid stack name" in err and "Traceback" not in err
    assert not (tmp_path / "none").exists()


# Each shell entry point that takes a stack name, with the arguments after it.
SCRIPTS = {
    "watch": ["--once"],
    "up": [],
    "down": [],
    "recover": ["--yes"],
    "supervise": ["--once"],
    "preview-report": [],
}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo as the scripts see it, without .state/ and out/: whatever a script wrote would show there."""
    root = tmp_path_factory.mktemp("repo")
    for entry in REPO.iterdir():
        if entry.name not in (".state", "out", ".git"):
            (root / entry.name).symlink_to(entry)
    return root


def _run(mirror: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "TRAINSTACK_"))}
    return subprocess.run(
        ["bash", *args], cwd=mirror, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_script_refuses_a_bad_name_before_building_a_path(script: str, mirror: Path) -> None:
    for name in ("../prod", "", "dev\n../x"):
        proc = _run(mirror, str(mirror / "scripts" / script), name, *SCRIPTS[script])
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert "not a valid stack name" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout == ""
    assert not (mirror / ".state").exists() and not (mirror / "out").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["preview", "--stack", "../prod"],
        ["preview", "-s", "Dev"],
        ["up", "--stack=a/b"],
        ["stack", "select", "--create", ".."],
        ["stack", "init", "../x"],
        ["config", "set", "--secret", "--stack", "", "k", "v"],
    ],
)
def test_scripts_pulumi_refuses_a_bad_stack_before_pulumi_runs(args: list[str], mirror: Path) -> None:
    proc = _run(mirror, str(mirror / "scripts" / "pulumi"), *args)
    assert proc.returncode == 2, proc.stderr
    assert "scripts/pulumi: stack " in proc.stderr and "not a valid stack name" in proc.stderr
    assert not (mirror / ".state").exists()


def test_python_m_watch_refuses_a_bad_name_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from watch.cli import main as watch_main

    assert watch_main(["../prod", "--cwd", str(tmp_path), "--once"]) == 2
    assert "scripts/watch: stack '../prod': not a valid stack name" in capsys.readouterr().err
