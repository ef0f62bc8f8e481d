"""A file backend torn by a killed pulumi: the empty or cut-short `.attrs` sidecar goes, nothing else does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ops.backend_repair import file_backend_root, repair, torn_sidecars


def _backend(tmp_path: Path) -> Path:
    stacks = tmp_path / ".pulumi" / "stacks" / "trainstack"
    stacks.mkdir(parents=True)
    (stacks / "prod.json").write_text(json.dumps({"version": 3, "checkpoint": {}}))
    (stacks / "prod.json.attrs").write_text(json.dumps({"user.cache_control": "", "md5": "AAAA"}))
    (stacks / "dev.json").write_text("{}")
    return stacks


def test_only_torn_sidecars_are_removed_and_each_is_said(tmp_path: Path) -> None:
    stacks = _backend(tmp_path)
    (stacks / "dev.json.attrs").write_text("")  # SIGKILLed before the first byte
    locks = tmp_path / ".pulumi" / "locks" / "organization" / "trainstack" / "prod"
    locks.mkdir(parents=True)
    (locks / "abc.json.attrs").write_text('{"md5": "x", "content')  # cut short
    said: list[str] = []
    removed = repair(f"file://{tmp_path}", log=said.append)
    assert sorted(p.name for p in removed) == ["abc.json.attrs", "dev.json.attrs"]
    assert not (stacks / "dev.json.attrs").exists() and not (locks / "abc.json.attrs").exists()
    # The checkpoints and the whole sidecar stay, byte for byte.
    assert (stacks / "prod.json.attrs").exists() and (stacks / "dev.json").read_text() == "{}"
    assert json.loads((stacks / "prod.json").read_text())["version"] == 3
    assert len(said) == 2 and any("left empty" in s for s in said) and any("cut short" in s for s in said)
    assert repair(f"file://{tmp_path}", log=said.append) == [] and len(said) == 2  # idempotent


def test_a_whole_backend_and_other_backends_are_left_alone(tmp_path: Path) -> None:
    _backend(tmp_path)
    assert torn_sidecars(tmp_path) == []
    assert repair(f"file://{tmp_path}") == []
    assert file_backend_root("s3://bucket/prefix") is None and repair("s3://bucket/prefix") == []
    assert file_backend_root(None) is None
    assert file_backend_root("file://~/state") == Path("~/state").expanduser()
    assert repair(f"file://{tmp_path / 'missing'}") == []


@pytest.mark.e2e
def test_the_real_cli_reads_the_stack_again_after_the_repair(tmp_path: Path) -> None:
    """Pulumi's own failure on an emptied sidecar ("failed to load checkpoint: EOF"), and its recovery."""
    project, backend = tmp_path / "project", tmp_path / "backend"
    project.mkdir()
    backend.mkdir()
    (project / "Pulumi.yaml").write_text("name: torn\nruntime: python\n")  # no program runs here
    env = os.environ | {"PULUMI_BACKEND_URL": f"file://{backend}", "PULUMI_CONFIG_PASSPHRASE": "test-only"}

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["pulumi", *args, "--stack", "s1", "--non-interactive"]
        return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=120)

    assert pulumi("stack", "init").returncode == 0  # writes the stack's checkpoint and its sidecar
    (backend / ".pulumi" / "stacks" / "torn" / "s1.json.attrs").write_text("")  # the SIGKILL's leftover
    torn = pulumi("stack", "output", "--json")
    assert torn.returncode != 0 and "failed to load checkpoint: EOF" in torn.stderr, torn.stderr
    assert [p.name for p in repair(f"file://{backend}", log=lambda _line: None)] == ["s1.json.attrs"]
    read = pulumi("stack", "output", "--json")
    assert read.returncode == 0 and json.loads(read.stdout) == {}, read.stderr
