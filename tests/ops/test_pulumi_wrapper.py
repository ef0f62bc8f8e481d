"""`scripts/pulumi`'s plan (ops/pulumi_wrapper.py): the stack's own workspace, the policy pack in every
preview and up, and no tracked file written (issue #68: `scripts/pulumi preview --stack dev`, as the docs
gave it, ran from the repo, wrote an `encryptionsalt` into stacks/Pulumi.dev.yaml and skipped the policy
pack). The real preview through the wrapper, with `git status` unchanged, is in
tests/e2e/test_up_output.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops import pulumi_wrapper
from ops.cli import _named_stacks
from ops.pulumi_wrapper import Plan, WrapperError, plan

REPO = pulumi_wrapper.REPO


def _plan(argv: list[str], local: bool, env: dict[str, str], repo: Path = REPO) -> Plan:
    """The plan of `scripts/pulumi ARGV`, with the stacks it names read as ops/cli.py reads them."""
    return plan(argv, _named_stacks(argv), local, env, repo)


LOCAL = {"TRAINSTACK_LOCAL_WORKSPACES": "/w"}


def test_a_local_preview_runs_in_the_demos_workspace_with_the_policy_pack() -> None:
    p = _plan(["preview", "--stack", "dev", "--diff"], local=True, env=LOCAL)
    assert p.workspace == Path("/w/dev") and p.demo and p.stack == "dev"
    assert p.argv[:4] == ("preview", "--stack", "dev", "--diff")
    pack = p.argv[p.argv.index("--policy-pack") + 1]
    assert pack == str(REPO / "policy")
    assert p.argv[p.argv.index("--policy-pack-config") + 1] == str(REPO / "policy/config/dev.json")


def test_an_up_gets_the_pack_and_a_given_pack_is_kept() -> None:
    assert "--policy-pack" in _plan(["up", "-s", "prod"], local=True, env=LOCAL).argv
    given = _plan(["preview", "--stack=dev", "--policy-pack", "/mine"], local=True, env=LOCAL).argv
    assert given.count("--policy-pack") == 1 and "/mine" in given


def test_a_local_read_uses_the_workspace_without_the_demos_preparation() -> None:
    p = _plan(["stack", "output", "--json", "--stack", "dev"], local=True, env=LOCAL)
    assert p.workspace == Path("/w/dev") and not p.demo and "--policy-pack" not in p.argv


def test_commands_about_no_stack_run_from_the_repo() -> None:
    for argv in (["version"], ["stack", "ls"], ["plugin", "ls"], ["about"]):
        p = _plan(argv, local=True, env=LOCAL)
        assert p.workspace == REPO and p.stack is None and not p.demo


def test_a_stack_command_must_name_its_stack() -> None:
    with pytest.raises(WrapperError, match="name the stack"):
        _plan(["preview"], local=True, env=LOCAL)


def test_unknown_and_invalid_stacks_are_refused_with_the_fix() -> None:
    with pytest.raises(WrapperError, match=r"no stack 'devv'.*choose one of: .*dev"):
        _plan(["preview", "--stack", "devv"], local=True, env=LOCAL)
    with pytest.raises(WrapperError):
        _plan(["preview", "--stack", "../etc"], local=True, env=LOCAL)


def test_the_real_runpod_previews_from_the_repo_only_where_the_stack_has_its_secrets_provider(
    tmp_path: Path,
) -> None:
    (tmp_path / "stacks").mkdir()
    bare = "config:\n  trainstack:cluster:\n    nodes: 1\n"
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(bare)
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text("encryptionsalt: v1:abc\n" + bare)
    # A shipped stack file has no salt: Pulumi would write one into the tracked file, so the preview is
    # refused with the fix, while the config set that writes it on purpose runs.
    with pytest.raises(WrapperError, match="no secrets provider yet"):
        _plan(["preview", "--stack", "dev"], local=False, env={}, repo=tmp_path)
    setting = _plan(
        ["config", "set", "--secret", "--stack", "dev", "k", "v"], local=False, env={}, repo=tmp_path
    )
    assert setting.workspace == tmp_path and "--policy-pack" not in setting.argv
    p = _plan(["preview", "--stack", "prod"], local=False, env={}, repo=tmp_path)
    assert p.workspace == tmp_path and not p.demo and "--policy-pack" in p.argv
