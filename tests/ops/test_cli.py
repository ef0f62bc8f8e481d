"""ops/cli.py: one parser for every command, the scripts as its wrappers, refusals before anything runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ops import cli
from ops.stacklock import StackLocked, held, lock_path
from ops.workspace import local_root, workspace_for
from scripts.cli import COMMANDS
from scripts.cli import main as trainstack

REPO = Path(__file__).resolve().parents[2]
WRAPPERS = sorted(
    p.name
    for p in (REPO / "scripts").iterdir()
    if p.is_file() and p.read_text().startswith("#!/usr/bin/env bash\nexec ") and p.name != "trainstack"
)
ALL = sorted({"up", "down", "recover", "local-runpod", *(c.name for c in (*cli.CORE, *COMMANDS))})


def test_every_wrapper_is_one_command_of_the_parser() -> None:
    assert WRAPPERS == ALL
    for name in WRAPPERS:
        lines = (REPO / "scripts" / name).read_text().splitlines()
        assert lines == [
            "#!/usr/bin/env bash",
            f'exec "$(dirname "${{BASH_SOURCE[0]}}")/trainstack" {name} "$@"',
        ]


@pytest.mark.parametrize("name", ALL)
def test_every_help_comes_from_its_parser(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = trainstack([name, "--help"])
    except SystemExit as done:  # argparse's --help
        code = int(done.code or 0)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith(f"usage: scripts/{name}"), out.out[:200]  # one format, the name as typed


def test_the_overview_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        trainstack(["--help"])
    assert done.value.code == 0
    listed = capsys.readouterr().out
    assert all(f"    {name}" in listed for name in ALL)


@pytest.mark.parametrize("flag", ["--skip-preview", "-f"])
def test_up_refuses_to_skip_the_preview_before_anything(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trainstack(["up", "dev", "--yes", flag]) == 2
    assert f"scripts/up: refusing {flag}:" in capsys.readouterr().err


# Issue #62: these went through as strings that were not exactly --skip-preview or -f (two pods rented past
# dev's cap), and a second policy pack with a lax config could replace the stack's caps.
@pytest.mark.parametrize(
    ("argv", "named"),
    [(["--skip-preview=true"], "--skip-preview=true"), (["--skip-preview=1"], "--skip-preview=1"),
     (["-f=true"], "-f=true (-f, --skip-preview)"), (["-rf"], "-rf (-f, --skip-preview)"),
     (["--diff", "--skip-preview"], "--skip-preview"),
     (["--policy-pack", "/tmp/lax", "--policy-pack-config", "/tmp/lax.json"], "--policy-pack"),
     (["--policy-pack-config=x.json"], "--policy-pack-config=x.json")],
)  # fmt: skip
def test_up_refuses_any_spelling_before_anything(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trainstack(["up", "dev", "--yes", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scripts/up: refusing {named}: "), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(("argv", "said"), [
    (["up", "Dev"], "not a valid stack name"),
    (["down", "nosuchstack"], "choose one of: "),
    (["recover", "../etc"], "not a valid stack name"),
    (["pulumi", "stack", "select", "Bad_Name"], "not a valid stack name"),
    (["pulumi", "config", "--stack=a/b"], "not a valid stack name"),
])  # fmt: skip
def test_a_bad_stack_is_refused_with_the_rule(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trainstack(argv) == 2
    assert said in capsys.readouterr().err


def test_recover_takes_no_pulumi_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        trainstack(["recover", "dev", "--target", "x"])
    assert done.value.code == 2
    assert "unrecognized arguments: --target x" in capsys.readouterr().err


def test_the_stacks_a_pulumi_command_names() -> None:
    assert cli._named_stacks(["stack", "select", "--create", "prod"]) == ["prod"]
    assert cli._named_stacks(["config", "set", "-s", "dev", "k", "v"]) == ["dev"]
    assert cli._named_stacks(["up", "--stack=search", "--cwd", "dev"]) == ["search"]
    assert cli._named_stacks(["version"]) == []


def test_one_up_per_stack_and_backend(tmp_path: Path) -> None:
    env = {"PULUMI_BACKEND_URL": f"file://{tmp_path}"}
    with held("dev", env, write_pid=True, repo=tmp_path) as path:
        assert path.read_text() == f"{os.getpid()}\n"
        with pytest.raises(StackLocked) as locked, held("dev", env, write_pid=False, repo=tmp_path):
            pass
        assert locked.value.pid == str(os.getpid())
        with held("dev", {"PULUMI_BACKEND_URL": "s3://other"}, write_pid=False, repo=tmp_path):
            pass  # another backend's dev is another stack
    assert lock_path("dev", env, tmp_path).parent.parent == tmp_path / ".state" / "locks"


def test_the_workspace_rule() -> None:
    env = {"TRAINSTACK_LOCAL_WORKSPACES": "/w"}
    assert workspace_for("dev", True, env, REPO) == Path("/w/dev")
    assert workspace_for("dev", False, env, REPO) == REPO
    assert local_root({}, REPO) == REPO / ".state" / "local"


def test_the_console_script_is_the_same_command_line() -> None:
    """`trainstack` in .venv/bin needs nothing sourced: the editable install puts the repo on its path."""
    done = subprocess.run(
        [str(REPO / ".venv/bin/trainstack"), "local-runpod", "--help"], env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/local-runpod [-h] {start,stop,status,env}")


def test_docs_cli_lists_every_command_and_each_exit_code() -> None:
    doc = (REPO / "docs/CLI.md").read_text()
    table = doc.split("## Commands", 1)[1].split("## ", 1)[0]
    assert (
        sorted(line.split("`")[1].split()[0] for line in table.splitlines() if line.startswith("| `")) == ALL
    )
    codes = doc.split("## Exit codes", 1)[1]
    from ops.orphans import NOT_CHECKED, ORPHANS_LEFT
    from ops.workflow import BAD_USE, BUSY, FAILED, OK

    for code in (OK, FAILED, BAD_USE, BUSY, ORPHANS_LEFT, NOT_CHECKED, 130):
        assert f"\n| {code} |" in codes


def test_up_asks_bootstrap_for_slurm_only_for_a_local_slurm_stack_as_root(tmp_path: Path) -> None:
    """A first `scripts/up dev` installs no database server; a `scheduler: slurm` stack's does (its emulated
    hosts run Slurm, munge, MariaDB and slurmdbd); the real RunPod and a non-root user get neither."""
    from ops.workflow import bootstrap_options

    assert bootstrap_options("dev", local=True, root=True) == ["--no-test-tools", "--with-torch"]
    assert bootstrap_options("dev", local=True, root=False) == ["--no-test-tools"]
    (tmp_path / "Pulumi.hpc.yaml").write_text("config:\n  trainstack:cluster:\n    scheduler: slurm\n")
    assert bootstrap_options("hpc", local=True, root=True, stacks_dir=tmp_path) == [
        "--no-test-tools",
        "--with-torch",
        "--with-slurm",
    ]
    assert bootstrap_options("hpc", local=False, root=True, stacks_dir=tmp_path) == ["--no-test-tools"]


@pytest.mark.parametrize(
    "argv",
    [
        ["stack", "init", "-sBad_Name"],
        ["stack", "init", "-s=Bad_Name"],
        ["stack", "init", "--stack=Bad_Name"],
        ["stack", "init", "--stack", "Bad_Name"],
        ["stack", "rename", "Bad_Name"],
        ["stack", "rename", "-s", "dev", "../up"],
        ["config", "set", "-ys", "Bad_Name", "k", "v"],
    ],
)
def test_every_spelling_of_a_stack_obeys_the_rule(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #62: `-sX`, `-s=X` and `stack rename` skipped the stack-name rule (pflag reads all of them)."""

    def ran(*args: object, **_: object) -> None:
        raise AssertionError(f"pulumi ran: {args}")

    monkeypatch.setattr(cli.workflow, "bootstrap", ran)
    monkeypatch.setattr(cli.pulumi, "replace_process", ran)
    assert trainstack(["pulumi", *argv]) == 2
    assert "not a valid stack name" in capsys.readouterr().err


def test_flag_values_are_not_taken_for_stacks() -> None:
    assert cli._named_stacks(["up", "-C", "dir", "-s", "a", "-m", "Some_Message"]) == ["a"]
    assert cli._named_stacks(["up", "-tstacks", "--stack", "b"]) == ["b"]
    assert cli._named_stacks(["stack", "rename", "-s", "dev", "dev-red"]) == ["dev", "dev-red"]
