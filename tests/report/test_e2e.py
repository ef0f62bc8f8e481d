"""scripts/preview-report end to end: the real Pulumi CLI and policy pack on the small contract program."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scripts.preview_report import EXIT_MANDATORY, EXIT_OK, report_stack
from tests.report.program.fake import GPU_HOURLY
from tests.report.scenarios import HF_TOKEN, SCENARIOS, prepare
from tests.support.pulumi_cli import REPO

pytestmark = pytest.mark.e2e
BY_NAME = {s.name: s for s in SCENARIOS}


def test_prod_from_four_to_eight_nodes_adds_four_nodes_price(tmp_path: Path) -> None:
    _, runner = prepare(BY_NAME["prod-scale-up"], tmp_path)
    report = report_stack(runner, "prod")
    assert [(c.name, c.op) for c in report.preview.changes if c.op != "same"] == [("train", "update")]
    assert report.after_totals.hourly - report.before_totals.hourly == pytest.approx(4 * 8 * GPU_HOURLY)
    assert report.mandatory == 0


def test_over_budget_change_fails_the_command_and_names_the_policy(tmp_path: Path) -> None:
    cli, _ = prepare(BY_NAME["prod-over-budget"], tmp_path)
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            str(REPO / "scripts/preview-report"),
            "--cwd",
            str(cli.project),
            "--no-create",
            "--json-out",
            str(out),
            "prod",
        ],
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == EXIT_MANDATORY, proc.stderr
    assert "| mandatory | `hourly-burn-limit` | (stack) |" in proc.stdout
    assert HF_TOKEN not in proc.stdout + proc.stderr + out.read_text()

    # Back under budget, the same command passes.
    cli.run("config", "set", "nodes", "8")
    proc = subprocess.run(
        [str(REPO / "scripts/preview-report"), "--cwd", str(cli.project), "prod"],
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
