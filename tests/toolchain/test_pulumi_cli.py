"""The built Pulumi CLI, our language host and Python dynamic providers work offline, for real."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.pulumi_cli import REPO, Pulumi, pinned_version

pytestmark = pytest.mark.e2e

PROGRAM = REPO / "tests/toolchain/program"
PACK = REPO / "tests/toolchain/pack"
THING = "pulumi-python:dynamic/toolcheck:Thing"


@pytest.fixture
def cli(tmp_path: Path) -> Pulumi:
    # A copy of the program, so stack config files (Pulumi.<stack>.yaml) never land in the repo.
    project = tmp_path / "program"
    shutil.copytree(PROGRAM, project, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
    (project / "Pulumi.yaml").write_text(
        (PROGRAM / "Pulumi.yaml").read_text().replace("../../../.venv", str(REPO / ".venv"))
    )
    p = Pulumi(project=project, state=tmp_path / "state")
    p.stack_init("check")
    return p


def test_version_is_the_pinned_one(cli: Pulumi) -> None:
    out = cli.run("version").stdout.strip()
    assert out == pinned_version()


def test_up_twice_then_destroy(cli: Pulumi) -> None:
    up = cli.run("up", "--yes", "--skip-preview")
    assert "+ 2 created" in up.stdout
    things = [r for r in cli.resources() if r["type"] == THING]
    assert [t["outputs"]["value"] for t in things] == ["hello"]

    # A second up must change nothing; --expect-no-changes makes pulumi itself fail otherwise.
    again = cli.run("up", "--yes", "--expect-no-changes")
    assert "2 unchanged" in again.stdout

    # A changed input replaces the resource (the provider's diff names the replace).
    cli.run("config", "set", "value", "world")
    preview = cli.run("preview", "--json")
    steps = json.loads(preview.stdout)["steps"]
    assert [s["op"] for s in steps if s["urn"].endswith("::one")] == ["replace"]

    cli.run("destroy", "--yes")
    assert [r for r in cli.resources() if r["type"] == THING] == []


def test_policy_pack_mandatory_violation_fails_preview(cli: Pulumi) -> None:
    cli.run("config", "set", "value", "forbidden")
    bad = cli.run("preview", "--policy-pack", str(PACK), check=False)
    assert "Policies:" in bad.stdout, bad.stdout + bad.stderr
    assert bad.returncode != 0
    assert "no-forbidden" in bad.stdout
    assert "mandatory" in bad.stdout
    assert cli.resources() == []  # nothing was created

    cli.run("config", "set", "value", "fine")
    cli.run("preview", "--policy-pack", str(PACK))


def test_recover_mends_the_empty_attrs_file_a_kill_leaves(cli: Pulumi) -> None:
    # SIGKILL during the file backend's in-place write of `<stack>.json.attrs` leaves it empty, and every
    # command then fails with "failed to load checkpoint: EOF" (seen in tests/e2e/test_crashes.py).
    cli.run("up", "--yes", "--skip-preview")
    (attrs,) = (cli.state / "backend").glob(".pulumi/stacks/*/check.json.attrs")
    attrs.write_text("")
    broken = cli.run("stack", "export", check=False)
    assert broken.returncode != 0 and "failed to load checkpoint: EOF" in broken.stdout + broken.stderr
    # A loopback RunPod URL: the target rule reads the shell as local and recover reads no running local
    # RunPod's address (ops/workflow.py); this program holds no RunPod resource, so nothing asks it.
    done = subprocess.run(
        [str(REPO / "scripts/recover"), "check", "--yes", "--cwd", str(cli.project)],
        env=cli.env() | {"RUNPOD_API_URL": "http://127.0.0.1:9"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # ops/backend_repair.py's line (what the supervisor runs each round too), on recover's stderr.
    said = f"removed {attrs.relative_to(cli.state / 'backend')}, an attributes file"
    assert said in done.stderr, done.stderr
    assert [r["type"] for r in cli.resources() if r["type"] == THING] == [THING]
