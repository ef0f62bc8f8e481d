"""A bare `pulumi preview --policy-pack policy --policy-pack-config FILE` (no scripts/up, no preview-report)
gets the checker's message for a bad file: the pack refuses it as it starts, before the engine reads the
file and before the program runs (issue #49, class 2). One real CLI run: about a second, nothing created."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # the real pulumi CLI

REPO = Path(__file__).resolve().parents[2]


def test_a_bare_preview_gets_the_checkers_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"run-cost-within-budget": {"max_run_cost_usd": true}, "no-such-policy": {}}')
    # The project as a mirror with its own stacks/: `stack init` writes the stack file's salt there.
    project = tmp_path / "project"
    project.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("stacks", ".state", "out", ".git"):
            (project / entry.name).symlink_to(entry)
    (project / "stacks").mkdir()
    (tmp_path / "state").mkdir()
    script = (
        f". {REPO}/scripts/env.sh && export PULUMI_BACKEND_URL=file://{tmp_path}/state "
        "PULUMI_CONFIG_PASSPHRASE=x && pulumi stack init bad-config --non-interactive >/dev/null && "
        f"pulumi preview --stack bad-config --non-interactive --policy-pack {REPO}/policy "
        f"--policy-pack-config {bad}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "PULUMI_"))}
    proc = subprocess.run(
        ["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert (
        f"{bad}: run-cost-within-budget.max_run_cost_usd: input should be a valid number; write a number"
        in out
    )
    assert f"{bad}: no-such-policy: no policy of that name" in out
    assert "Traceback" not in out and "Invalid type" not in out
    assert "+ " not in out.split("Diagnostics:")[0].splitlines()[-1]  # nothing planned, let alone created
