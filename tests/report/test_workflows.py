"""The GitHub workflows: actionlint (built by scripts/bootstrap) finds nothing, and the contracts hold."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.cachedir import cache_dir
from scripts.preview_report_render import MARKER
from tests.support.pulumi_cli import REPO

WORKFLOWS = REPO / ".github/workflows"


def actionlint() -> Path:
    """The binary scripts/bootstrap builds from tools/actionlint, cached by version outside the repo."""
    for line in (REPO / "tools/actionlint/go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["github.com/rhysd/actionlint"]:
            binary = cache_dir() / f"actionlint-{parts[1]}" / "actionlint"
            if not binary.exists():
                pytest.fail(f"{binary} is missing: run scripts/bootstrap")
            return binary
    raise AssertionError("tools/actionlint/go.mod does not pin github.com/rhysd/actionlint")


def lint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint()), "-no-color", "-oneline", *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def load(name: str) -> dict[str, Any]:
    # PyYAML reads the key `on` as True (YAML 1.1); nothing below needs it.
    return yaml.safe_load((WORKFLOWS / name).read_text())  # type: ignore[no-any-return]


def test_actionlint_passes_on_every_workflow() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files
    proc = lint(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_does_catch_mistakes() -> None:
    broken = "on: push\npermissions: {contents: reed}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
    broken += "    steps:\n      - run: echo ${{ github.nope }}\n"
    proc = lint("-", stdin=broken)
    assert proc.returncode == 1
    assert "reed" in proc.stdout and "nope" in proc.stdout


def test_preview_may_only_read_code_and_write_comments() -> None:
    preview = load("preview.yml")
    assert preview["permissions"] == {"contents": "read", "pull-requests": "write"}
    text = (WORKFLOWS / "preview.yml").read_text()
    assert MARKER in text  # the same marker the report starts with finds the comment to update
    for name in ("RUNPOD_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PULUMI_CONFIG_PASSPHRASE"):
        assert f"secrets.{name}" in text
    assert "--policy-pack" not in text  # scripts/preview-report passes the pack and <stack>.json itself


def test_deploy_is_serialised_gated_and_read_only() -> None:
    deploy, stack = load("deploy.yml"), load("deploy-stack.yml")
    assert deploy["permissions"] == {"contents": "read"} == stack["permissions"]
    assert deploy["concurrency"]["cancel-in-progress"] is False
    assert [deploy["jobs"][j].get("needs") for j in ("dev", "search", "prod")] == [None, "dev", "search"]
    assert {deploy["jobs"][j]["with"]["stack"] for j in deploy["jobs"]} == {"dev", "search", "prod"}
    up = stack["jobs"]["up"]
    assert up["environment"] == "${{ inputs.stack }}"
    assert up["concurrency"]["cancel-in-progress"] is False
