"""Issue #62: a target and its backend are one decision (ops/workspace.py's `resolve_target`), asked by every
command before it reads anything; the local demo's salt, key and secrets stay the demo's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import pulumi
from common.loopback import is_loopback_url
from localcloud.servers import Servers
from ops import workspace
from ops.workspace import Target, TargetConflict, resolve_target
from scripts.cli import main as trainstack

REPO = Path(__file__).resolve().parents[2]
TEAM_URL = "https://api.runpod.io"
TEAM_KEY = "rpa_TEAMKEY0123456789"  # shaped like a real key: it must never be printed
TEAM_BACKEND = "s3://team-state?region=us-east-1"


@pytest.mark.parametrize(
    "url",
    [
        "http://LOCALHOST:8080",
        "http://localhost.:8080/",
        "http://api.localhost",
        "http://127.1:8080",
        "http://127.0.0.1",
        "http://127.8.9.10",
        "http://0x7f.1",
        "http://2130706433",
        "http://0.0.0.0:8080",
        "http://[::1]:8080",
        "http://[::]:8080",
        "http://[::ffff:127.0.0.1]:8080",
        "http://[::FFFF:7F00:1]:8080",
        "HTTP://LocalHost",
    ],
)
def test_every_spelling_of_this_machine_is_local(url: str) -> None:
    assert is_loopback_url(url)
    assert resolve_target({"RUNPOD_API_URL": url, "RUNPOD_API_KEY": "k"}).local


@pytest.mark.parametrize(
    "url",
    [
        TEAM_URL,
        "http://127.0.0.1.example.com",
        "http://10.0.0.5:8080",
        "http://[::ffff:10.0.0.5]",
        "http://localhost.example.com",
        "http://user@/x",
        "not a url",
    ],
)
def test_any_other_host_is_real(url: str) -> None:
    assert not is_loopback_url(url)


def _target(**env: str) -> Target:
    return resolve_target(env)


def test_the_rule_and_its_backend() -> None:
    assert _target() == Target(True, "", "", "no RUNPOD_API_URL and no RunPod key")
    assert _target(TRAINSTACK_LOCAL="1", RUNPOD_API_KEY=TEAM_KEY).local  # the local RunPod's env wins
    assert _target(RUNPOD_API_KEY="local-runpod-key").local  # the local RunPod's own key is no real one
    real = _target(RUNPOD_API_KEY=TEAM_KEY, PULUMI_BACKEND_URL=TEAM_BACKEND)
    assert (real.local, real.runpod_url, real.backend_url) == (False, TEAM_URL, TEAM_BACKEND)
    assert not _target(RUNPOD_API_URL="http://10.0.0.5", PULUMI_BACKEND_URL="file:///tmp/other").local
    # The local demo with a file backend of its own (the tests' temporary ones) is the local demo.
    assert _target(RUNPOD_API_URL="http://127.0.0.1:9", PULUMI_BACKEND_URL="file:///tmp/b").local


@pytest.mark.parametrize(
    ("env", "named"),
    [
        # The first shell: the local demo asked for, the team's URL and key still set.
        (
            {"TRAINSTACK_LOCAL": "1", "RUNPOD_API_URL": TEAM_URL, "RUNPOD_API_KEY": TEAM_KEY},
            ("TRAINSTACK_LOCAL=1", "RUNPOD_API_URL=https://api.runpod.io", "unset"),
        ),
        # The second: the team's key and no backend, so the local demo's (same stack names).
        ({"RUNPOD_API_KEY": TEAM_KEY}, ("RUNPOD_API_KEY", "no PULUMI_BACKEND_URL", "export the team's")),
        (
            {"RUNPOD_API_KEY": TEAM_KEY, "PULUMI_BACKEND_URL": pulumi.default_backend(REPO)},
            ("PULUMI_BACKEND_URL=file://", "the local demo's backend"),
        ),
        (
            {"RUNPOD_API_URL": TEAM_URL, "PULUMI_BACKEND_URL": ""},
            ("RUNPOD_API_URL=https://api.runpod.io", "no PULUMI_BACKEND_URL"),
        ),
        # The local demo with the team's shared state.
        (
            {"PULUMI_BACKEND_URL": TEAM_BACKEND},
            ("PULUMI_BACKEND_URL=s3://team-state", "unset PULUMI_BACKEND_URL"),
        ),
        (
            {"RUNPOD_API_URL": "http://127.0.0.1:9", "PULUMI_BACKEND_URL": "https://api.pulumi.com"},
            ("PULUMI_BACKEND_URL=https://api.pulumi.com", "local demo"),
        ),
    ],
)
def test_a_shell_naming_both_is_refused_with_the_fix(env: dict[str, str], named: tuple[str, ...]) -> None:
    with pytest.raises(TargetConflict) as refused:
        resolve_target(env, REPO)
    said = str(refused.value)
    assert "\n" not in said and all(part in said for part in named), said
    assert TEAM_KEY not in said and "region=" not in said  # names the variables, never a key or a query


# -- every command asks before any read -------------------------------------------------------------------


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """No Pulumi, no process, no RunPod client: a refusal before any read touches none of them. The
    environment is put back afterwards (a command that goes on updates os.environ)."""
    saved = dict(os.environ)
    ran: list[str] = []

    def refuse(*args: Any, **_: Any) -> Any:
        ran.append(repr(args)[:200])
        raise AssertionError(f"ran {args!r}"[:300])

    import subprocess

    from providers.runpod.client import RunPodClient

    monkeypatch.setattr(pulumi, "run", refuse)
    monkeypatch.setattr(pulumi, "replace_process", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(RunPodClient, "from_env", classmethod(refuse))
    for key in ("RUNPOD_API_URL", "RUNPOD_API_KEY", "TRAINSTACK_LOCAL", "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(key, raising=False)
    yield ran
    os.environ.clear()
    os.environ.update(saved)


MIXED = (
    {"TRAINSTACK_LOCAL": "1", "RUNPOD_API_URL": TEAM_URL, "RUNPOD_API_KEY": TEAM_KEY},
    {"RUNPOD_API_KEY": TEAM_KEY},
)
COMMANDS = (
    ["recover", "dev", "--delete-orphans", "--yes"],
    ["supervise", "dev", "--once"],
    ["watch", "dev", "--once"],
    ["reconcile", "--delete"],
    ["up", "dev", "--yes"],
    ["down", "dev"],
    ["preview-report", "dev"],
    ["pulumi", "stack", "ls"],
)


@pytest.mark.parametrize("shell", MIXED, ids=("local-with-team-url", "team-key-no-backend"))
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_every_command_refuses_a_mixed_shell_before_any_read(
    argv: list[str],
    shell: dict[str, str],
    nothing_runs: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue: recover --delete-orphans deleted the team's pod; supervise --once judged the local stack
    against the team's account; reconcile --delete deleted the team's pod as lost."""
    for key, value in shell.items():
        monkeypatch.setenv(key, value)
    assert trainstack(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "refused:" in lines[0], err
    assert TEAM_KEY not in err
    assert nothing_runs == []


def test_a_local_stack_never_falls_back_to_the_real_url(
    nothing_runs: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TRAINSTACK_LOCAL=1, the team's key, the local RunPod stopped: recover said "not running" and went on,
    its client then on the providers' default URL, the real RunPod's, with the team's key."""
    (tmp_path / "Pulumi.yaml").write_text("name: trainstack\nruntime: python\n")
    monkeypatch.setenv("TRAINSTACK_LOCAL", "1")
    monkeypatch.setenv("RUNPOD_API_KEY", TEAM_KEY)
    monkeypatch.setenv("TRAINSTACK_STATE_DIR", str(tmp_path / "no-servers"))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'backend'}")
    assert trainstack(["recover", "dev", "--yes", "--cwd", str(tmp_path)]) == 3
    assert "the local RunPod is not running" in capsys.readouterr().err
    assert nothing_runs == []


def test_recover_never_runs_the_demo_in_the_repo(
    nothing_runs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`recover --cwd <repo>` on the local demo ran Pulumi on the tracked stack file, which took the local
    backend's salt."""
    monkeypatch.setenv("RUNPOD_API_URL", "http://127.0.0.1:9")
    assert trainstack(["recover", "dev", "--yes", "--cwd", str(REPO)]) == 2
    assert "would write its salt into the tracked stacks/Pulumi.dev.yaml" in capsys.readouterr().err
    assert nothing_runs == []


# -- the demo's salt and secrets stay in the demo's workspace ---------------------------------------------


def test_the_demo_copy_never_takes_the_teams_salt_or_secrets(tmp_path: Path) -> None:
    """Once the team commits its `encryptionsalt`, the demo's copy held two (the team's and its own): every
    local `up` of the stack failed for good."""
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    (repo / "Pulumi.yaml").write_text("name: trainstack\nruntime:\n  name: python\n")
    tracked = repo / "stacks" / "Pulumi.dev.yaml"
    tracked.write_text(
        "encryptionsalt: v1:TEAMSALT\nconfig:\n  trainstack:cluster:\n    nodes: 2\n"
        "  runpod:apiKey:\n    secure: v1:TEAMSECRET\n"
    )
    demo = workspace.prepare("dev", tmp_path / "local", repo)
    copy = demo / "stacks" / "Pulumi.dev.yaml"
    copy.write_text(copy.read_text() + "encryptionsalt: v1:DEMOSALT\n")  # what the demo's Pulumi adds
    workspace.prepare("dev", tmp_path / "local", repo)  # the next `up`
    doc = yaml.safe_load(copy.read_text())  # one key each, or YAML's duplicate would be Pulumi's error
    assert copy.read_text().count("encryptionsalt") == 1 and doc["encryptionsalt"] == "v1:DEMOSALT"
    assert doc["config"] == {"trainstack:cluster": {"nodes": 2}}
    assert "DEMOSALT" not in tracked.read_text()


def test_a_file_without_the_teams_secrets_is_copied_as_written(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    (repo / "Pulumi.yaml").write_text("name: trainstack\nruntime:\n  name: python\n")
    text = "# a comment kept\nconfig:\n  trainstack:cluster:\n    nodes: 2\n"
    (repo / "stacks" / "Pulumi.dev.yaml").write_text(text)
    demo = workspace.prepare("dev", tmp_path / "local", repo)
    assert (demo / "stacks" / "Pulumi.dev.yaml").read_text() == text


# -- the local RunPod's key is its own --------------------------------------------------------------------


def test_the_local_runpod_never_adopts_or_prints_a_key_from_the_shell(tmp_path: Path) -> None:
    servers = Servers.from_env({"RUNPOD_API_KEY": TEAM_KEY, "TRAINSTACK_STATE_DIR": str(tmp_path)})
    for name, text in (("emulator.port", "40123"), ("moto.port", "127.0.0.1:40124")):
        (tmp_path / name).write_text(f"{text}\n")
    exported = servers.env()  # what `start` and `env` print
    assert servers.key == exported["RUNPOD_API_KEY"] == "local-runpod-key"
    assert TEAM_KEY not in repr(exported)
