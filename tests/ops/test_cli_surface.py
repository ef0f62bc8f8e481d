"""The one command line's surface (issue #68): `--version`, and a stack that does not exist is bad use with
the closest one, never advice to bring it up (`watch devv` advised `scripts/up devv`)."""

from __future__ import annotations

import os

import pytest

from ops import cli
from scripts import cli as scripts_cli


def test_version_prints_the_projects_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        scripts_cli.main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("trainstack 0.1.0")


@pytest.mark.parametrize("command", ["watch", "logs", "ssh", "supervise"])
def test_an_unknown_stack_gets_the_closest_one_not_scripts_up(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scripts_cli.main([command, "devv"]) == 2
    err = capsys.readouterr().err
    assert "no stack 'devv'" in err and "did you mean dev?" in err
    assert "scripts/up devv" not in err


def test_the_stack_is_checked_before_the_target_or_the_local_runpod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli.workflow, "decided_target", lambda prog: pytest.fail("read the target first"))
    with pytest.raises(cli.Stop) as stop:
        cli.stack_workspace("scripts/watch", "prdo", start=False)
    assert stop.value.code == 2


@pytest.mark.parametrize("module", ["watch.cli", "supervisor.cli"])
def test_watch_and_supervise_alone_need_no_cwd_and_say_their_whole_sentence(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m watch STACK` demanded a --cwd its usage did not show; supervise's help showed that internal
    --cwd as required and its description stopped mid-sentence."""
    import importlib

    main = importlib.import_module(module).main
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "--cwd" not in text and "examples:" in text
    description = text.split("\n\n")[1]
    assert description.rstrip().endswith(".")
    assert main(["devv"]) == 2  # found like scripts/watch finds it: the stack's closest name, not "--cwd"
    err = capsys.readouterr().err
    assert "did you mean dev?" in err and "--cwd" not in err


@pytest.mark.parametrize("command", ["reconcile", "team-budget"])
def test_reconcile_and_team_budget_find_the_demo_alone_like_watch(
    command: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """They refused the demo without `eval "$(scripts/local-runpod env)"`; watch found it alone."""
    monkeypatch.setattr(os, "environ", os.environ.copy())  # what the command adds stays in this test
    for name in ("RUNPOD_API_URL", "RUNPOD_API_KEY", "PULUMI_BACKEND_URL", "TRAINSTACK_LOCAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINSTACK_STATE_DIR", str(tmp_path))  # no local RunPod runs there
    assert scripts_cli.main([command, "report.json"] if command == "team-budget" else [command]) == 3
    assert "the local RunPod is not running" in capsys.readouterr().err

    seen: dict[str, str] = {}

    class Running:
        @staticmethod
        def from_env(env: object) -> Running:
            return Running()

        def running(self) -> bool:
            return True

        def env(self) -> dict[str, str]:
            return {"RUNPOD_API_URL": "http://127.0.0.1:9", "RUNPOD_API_KEY": "local-key"}

    monkeypatch.setattr(cli, "Servers", Running)
    wrapped = cli.on_account(f"scripts/{command}", lambda argv: seen.update(os.environ) or 0)
    assert wrapped([]) == 0
    assert seen["RUNPOD_API_URL"] == "http://127.0.0.1:9"


@pytest.mark.parametrize("command", ["forecast", "up", "watch", "supervise", "logs", "reconcile"])
def test_every_help_wraps_at_one_width(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Help wrapped at 80 columns in some commands (argparse without a terminal) and 110 in others (the
    texts written by hand): now every one at 110."""
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.delenv("COLUMNS", raising=False)
    with pytest.raises(SystemExit):
        scripts_cli.main([command, "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= cli.HELP_WIDTH
    if command == "forecast":  # argparse's own wrapping (the options' help) goes past 80 now
        assert max(len(line) for line in lines if line.startswith("  --")) > 80
    assert os.environ["COLUMNS"] == str(cli.HELP_WIDTH + 2)
