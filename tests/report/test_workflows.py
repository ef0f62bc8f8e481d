"""The GitHub workflows: actionlint (built by scripts/bootstrap) finds nothing, and the contracts hold."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.cachedir import cache_dir
from harness.pulumi_cli import REPO
from report.render import MARKER

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
    assert preview["permissions"] == {"contents": "read", "issues": "read", "pull-requests": "write"}
    text = (WORKFLOWS / "preview.yml").read_text()
    assert MARKER in text  # the same marker the report starts with finds the comment to update
    for name in (
        "RUNPOD_READ_ONLY_API_KEY",
        "PREVIEW_AWS_ACCESS_KEY_ID",
        "PREVIEW_AWS_SECRET_ACCESS_KEY",
        "PULUMI_CONFIG_PASSPHRASE",
    ):
        assert f"secrets.{name}" in text
    assert "--policy-pack" not in text  # scripts/preview-report passes the pack and <stack>.json itself


def _secrets(text: str) -> set[str]:
    return set(re.findall(r"secrets\.([A-Z0-9_]+)", text))


def test_preview_holds_no_key_that_can_spend_and_the_write_keys_live_in_environments() -> None:
    """Issue #45: the PR's own code runs in the preview, so it gets the read-only keys and no webhook."""
    preview = load("preview.yml")["jobs"]["preview"]
    assert preview["env"]["TRAINSTACK_READ_ONLY"] == "1"
    budget = load("preview.yml")["jobs"]["team-budget"]  # the required check's name
    assert budget["needs"] == "preview" and "budget_rc" in str(budget["steps"])
    assert {"labeled", "unlabeled"} <= set(_on(load("preview.yml"))["pull_request"]["types"])
    assert preview["env"]["RUNPOD_API_KEY"] == "${{ secrets.RUNPOD_READ_ONLY_API_KEY }}"
    used = _secrets((WORKFLOWS / "preview.yml").read_text())
    assert used.isdisjoint({"RUNPOD_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}), used
    assert not any("WEBHOOK" in s for s in used) and "environment" not in preview
    assert load("deploy-stack.yml")["jobs"]["up"]["environment"] == "${{ inputs.stack }}"
    assert load("supervise.yml")["jobs"]["round"]["environment"] == "${{ matrix.stack }}-supervise"
    docs = {d: (REPO / "docs" / d).read_text() for d in ("PREVIEW-REPORT.md", "SUPERVISOR.md")}
    reconcile = load("reconcile.yml")
    assert reconcile["permissions"] == {"contents": "read"}
    assert "schedule" in _on(reconcile) and reconcile["jobs"]["reconcile"]["environment"] == "reconcile"
    key = reconcile["jobs"]["reconcile"]["env"]["RUNPOD_API_KEY"]
    assert "PULUMI_CONFIG_PASSPHRASE" not in _secrets((WORKFLOWS / "reconcile.yml").read_text())  # ids only
    assert key.startswith("${{ inputs.delete && secrets.RUNPOD_API_KEY ||")  # the write key only to delete
    pairs = (
        ("preview.yml", "PREVIEW-REPORT.md"),
        ("supervise.yml", "SUPERVISOR.md"),
        ("reconcile.yml", "SUPERVISOR.md"),
    )
    for workflow, doc in pairs:
        for name in _secrets((WORKFLOWS / workflow).read_text()):
            assert f"`{name}`" in docs[doc], f"docs/{doc} does not name {name}, which {workflow} reads"


def test_deploy_is_serialised_gated_and_read_only() -> None:
    deploy, stack = load("deploy.yml"), load("deploy-stack.yml")
    assert deploy["permissions"] == {"contents": "read"} == stack["permissions"]
    assert deploy["concurrency"]["cancel-in-progress"] is False
    assert [deploy["jobs"][j].get("needs") for j in ("dev", "search", "prod")] == [None, "dev", "search"]
    assert {deploy["jobs"][j]["with"]["stack"] for j in deploy["jobs"]} == {"dev", "search", "prod"}
    up = stack["jobs"]["up"]
    assert up["environment"] == "${{ inputs.stack }}"
    assert up["concurrency"]["cancel-in-progress"] is False


def _on(workflow: dict[str, Any]) -> dict[str, Any]:
    return workflow.get("on") or workflow[True]  # type: ignore[no-any-return]  # YAML 1.1 reads `on` as True


def test_test_runs_scripts_test_on_pull_requests_and_pushes_with_caches() -> None:
    test = load("test.yml")
    assert {"pull_request", "push"} <= set(_on(test))
    assert test["permissions"] == {"contents": "read"}
    steps = test["jobs"]["test"]["steps"]
    assert [s["run"] for s in steps if "run" in s] == ["scripts/test"]  # what developers run, verbatim
    uses = {s["uses"].split("@")[0]: s.get("with", {}) for s in steps if "uses" in s}
    assert uses["actions/setup-go"]["cache-dependency-path"] == "tools/*/go.sum"  # Go module + build cache
    cached = {
        w["path"]: w["key"]
        for s in steps
        if s.get("uses", "").startswith("actions/cache")
        for w in [s["with"]]
    }
    assert "uv.lock" in cached["~/.cache/uv"]  # uv's wheels, keyed by the lock
    assert "go.sum" in cached["~/.cache/trainstack"]


def test_deploy_runs_only_after_test_passed_on_main_and_deploys_that_commit() -> None:
    deploy, stack = load("deploy.yml"), load("deploy-stack.yml")
    run = _on(deploy)["workflow_run"]
    assert run == {"workflows": [load("test.yml")["name"]], "types": ["completed"], "branches": ["main"]}
    gate = deploy["jobs"]["dev"]["if"]
    assert "conclusion == 'success'" in gate and "event == 'push'" in gate and "head_repository" in gate
    for job in deploy["jobs"].values():
        assert job["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}"
    checkout = next(
        s for s in stack["jobs"]["up"]["steps"] if s.get("uses", "").startswith("actions/checkout")
    )
    assert checkout["with"]["ref"] == "${{ inputs.ref }}"


def test_the_team_budget_reads_the_team_file_of_the_base_branch() -> None:
    """Issue #62: a pull request that raised the budget in its own stacks/team.yaml passed its own check."""
    steps = load("preview.yml")["jobs"]["preview"]["steps"]
    base = [s for s in steps if s.get("with", {}).get("ref") == "${{ github.event.pull_request.base.sha }}"]
    assert len(base) == 1 and base[0]["uses"].startswith("actions/checkout@")
    folder = base[0]["with"]["path"]
    assert base[0]["with"]["sparse-checkout"] == "stacks/team.yaml"
    budget = next(s for s in steps if s.get("id") == "budget")
    assert f"--team-file {folder}/stacks/team.yaml" in budget["run"]
    assert steps.index(base[0]) < steps.index(budget)
