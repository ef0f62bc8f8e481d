"""The one door to the stack files: the stacks there are, a missing one refused with the list, the config map
read the same way for every caller, secrets never handed to the parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ops import local_account, workspace
from stackconfig import files
from stackconfig.config import StackConfig

REPO = Path(__file__).resolve().parents[2]


def _stacks(tmp_path: Path, **texts: str) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name, text in texts.items():
        (stacks / f"Pulumi.{name}.yaml").write_text(text)
    return stacks


def test_the_shipped_stacks_are_listed_and_parse() -> None:
    assert files.stack_names() == ["dev", "local-cpu", "prod", "search"]
    for stack in files.stack_names():
        assert isinstance(files.load(stack), StackConfig)
    assert files.load("prod").cluster.nodes == 8


def test_an_empty_file_or_config_is_an_empty_map(tmp_path: Path) -> None:
    stacks = _stacks(tmp_path, a="", b="config:\n", c="config:\n  trainstack:protect: true\n")
    assert files.read_config("a", stacks) == {}
    assert files.read_config("b", stacks) == {}
    assert files.read_config("c", stacks) == {"trainstack:protect": True}


def test_a_missing_stack_names_the_file_and_the_known_stacks(tmp_path: Path) -> None:
    stacks = _stacks(tmp_path, dev="", prod="")
    with pytest.raises(files.UnknownStackError) as err:
        files.read_config("staging", stacks)
    assert str(err.value) == (
        f"no stack 'staging': {stacks / 'Pulumi.staging.yaml'} does not exist (known: dev, prod)"
    )
    with pytest.raises(files.UnknownStackError) as err:
        files.stack_file("staging")
    assert "stacks/Pulumi.staging.yaml does not exist (known: dev, local-cpu, prod, search)" in str(err.value)


def test_secret_values_are_not_parsed(tmp_path: Path) -> None:
    text = "config:\n  trainstack:secrets.HF_TOKEN:\n    secure: v1:abc\n  trainstack:protect: true\n"
    stacks = _stacks(tmp_path, s=text)
    assert "trainstack:secrets.HF_TOKEN" in files.read_config("s", stacks)
    assert files.without_secrets(files.read_config("s", stacks)) == {"trainstack:protect": True}
    assert files.load("s", stacks).protect is True


def test_the_entry_points_refuse_a_missing_stack_with_the_same_words(tmp_path: Path) -> None:
    expected = str(files.UnknownStackError("staging", files.STACKS_DIR))
    with pytest.raises(files.UnknownStackError) as unknown:
        workspace.prepare("staging", tmp_path)
    assert str(unknown.value) == expected
    with pytest.raises(files.UnknownStackError) as err:
        local_account.stack_cost("staging")
    assert str(err.value) == expected
    forecast = subprocess.run(
        [sys.executable, "-m", "forecast.cli", "staging"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert forecast.returncode == 2 and forecast.stderr == f"forecast: {expected}\n"
