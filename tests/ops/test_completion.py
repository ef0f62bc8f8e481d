"""Shell completion from the one command line's parsers (ops/completion.py, argcomplete; issue #68: there
was none): command names, flags, stack names, and the shell code `trainstack completion SHELL` prints."""

from __future__ import annotations

import io

import pytest
from argcomplete.finders import CompletionFinder

from ops import cli, completion
from scripts.cli import COMMANDS


def _complete(line: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    monkeypatch.setenv("COMP_LINE", line)
    monkeypatch.setenv("COMP_POINT", str(len(line)))
    monkeypatch.setenv("_ARGCOMPLETE_IFS", "\n")
    # argcomplete's debug stream is fd 9 by default, which under pytest is another file's (its docstring
    # says so): keep it on stderr, or the test run loses that descriptor.
    monkeypatch.setattr(CompletionFinder, "_init_debug_stream", lambda self: None)
    out = io.StringIO()
    exits: list[int] = []
    completion.answer(lambda: cli.parser(COMMANDS), output_stream=out, exit_method=exits.append)
    assert exits == [0]
    return sorted(w.strip() for w in out.getvalue().split("\n") if w.strip())


def test_commands_flags_and_stacks_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _complete("trainstack lo", monkeypatch) == ["local-runpod", "logs"]
    assert _complete("trainstack watch de", monkeypatch) == ["dev"]
    assert _complete("trainstack forecast ", monkeypatch) == ["dev", "local-cpu", "prod", "search"]
    assert "--delete-orphans" in _complete("trainstack recover prod --", monkeypatch)


def test_no_shell_asking_means_nothing_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_ARGCOMPLETE", raising=False)
    completion.answer(lambda: pytest.fail("built a parser"))


def test_the_shell_code_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", "bash"], COMMANDS) == 0
    code = capsys.readouterr().out
    assert "complete" in code and "trainstack" in code and "_ARGCOMPLETE" in code
