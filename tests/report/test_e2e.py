"""scripts/preview-report end to end with the real Pulumi CLI and policy pack.

First on the trainstack program itself against a local RunPod (prod deployed at 4 nodes once per module,
then previewed at other configs: a preview changes nothing), then on the small stand-in program.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO
from report.cli import EXIT_MANDATORY, EXIT_OK, PulumiRunner, report_stack
from tests.e2e.stacks import StackRun
from tests.report.program.fake import GPU_HOURLY
from tests.report.scenarios import (
    HF_TOKEN,
    NODES,
    REAL_SCENARIOS,
    SCENARIOS,
    policy_configs,
    prepare,
    prepare_real,
    set_path_config,
)

pytestmark = pytest.mark.e2e
BY_NAME = {s.name: s for s in SCENARIOS}
REAL_PROD = next(s for s in REAL_SCENARIOS if s.stack == "prod")
H100_SXM = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def real_prod(
    tmp_path_factory: pytest.TempPathFactory, local_runpod: LocalRunPod, moto_s3: str
) -> Iterator[tuple[StackRun, PulumiRunner]]:
    """The shipped prod stack deployed at 4 nodes on the local RunPod, its config back at the shipped 8."""
    local_runpod.admin.reset()
    run, runner = prepare_real(REAL_PROD, tmp_path_factory.mktemp("real-prod"), local_runpod, moto_s3)
    yield run, runner
    run.destroy()


def catalog_price(runpod: LocalRunPod, gpu_id: str) -> float:
    """Secure-cloud USD per GPU-hour, as the local RunPod's GPU catalog lists it."""
    with runpod.client() as client:
        data: Any = client.get("/v2/catalog/gpus").json()
    gpus = data["gpus"] if isinstance(data, dict) else data
    return float(next(g for g in gpus if g["id"] == gpu_id)["price"]["secure"])


def preview_report(run: StackRun, *extra: str) -> subprocess.CompletedProcess[str]:
    """`scripts/preview-report` on the stack's workspace, as CI runs it (`--no-create`)."""
    return subprocess.run(
        [
            str(REPO / "scripts/preview-report"),
            "--cwd",
            str(run.cli.project),
            "--no-create",
            *extra,
            run.stack,
        ],
        env=run.cli.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_real_prod_from_four_to_eight_nodes_adds_four_nodes_price(
    real_prod: tuple[StackRun, PulumiRunner], local_runpod: LocalRunPod
) -> None:
    _, runner = real_prod
    shipped = yaml.safe_load((REPO / "stacks/Pulumi.prod.yaml").read_text())["config"]
    assert shipped["trainstack:cluster"]["nodes"] == int(REAL_PROD.after[NODES]) == 8
    assert shipped["trainstack:cluster"]["gpu_type"] == "H100_SXM"

    report = report_stack(runner, "prod")
    assert not report.preview.failed, report.preview
    changed = [(c.name, c.type.rsplit(":", 1)[-1], c.op) for c in report.preview.changes if c.op != "same"]
    assert changed == [("prod-cluster", "InstantCluster", "replace")]
    four_nodes = 4 * 8 * catalog_price(local_runpod, H100_SXM)
    assert four_nodes == pytest.approx(4 * 8 * 3.99)
    assert report.after_totals.hourly - report.before_totals.hourly == pytest.approx(four_nodes)
    assert report.mandatory == 0, report.preview.violations


def test_real_prod_over_budget_change_fails_the_command_and_names_the_policy(
    real_prod: tuple[StackRun, PulumiRunner], tmp_path: Path
) -> None:
    run, runner = real_prod
    try:
        # Nine 8-GPU pods: $287/h, over prod's $280/h hourly-burn-limit. (Their forecast, 133 h over global
        # networking, is also over prod's $10k run cap, which the program refuses before any policy runs:
        # a cap raised for this step leaves the burn the one thing over.)
        set_path_config(run, {"trainstack:cluster.topology": "pods", NODES: "9"})
        set_path_config(run, {"trainstack:run.max_cost_usd": "100000"})
        out = tmp_path / "report.json"
        proc = preview_report(run, "--json-out", str(out))
        assert proc.returncode == EXIT_MANDATORY, proc.stdout + proc.stderr
        assert "| mandatory | `hourly-burn-limit` | (stack) |" in proc.stdout
        assert "local-demo-" not in proc.stdout + proc.stderr + out.read_text()

        # The shipped cluster, but a 96-hour watchdog bound: $24.5k at its longest, over prod's $10k run cap,
        # yet one run is the forecast's ($4.8k), so run-cost-limit passes (issue #68: one run cost
        # everywhere; the bound is not a run).
        set_path_config(run, {"trainstack:run.max_cost_usd": "10000"})
        set_path_config(run, {"trainstack:cluster.topology": "cluster", NODES: "8"})
        set_path_config(run, {"trainstack:training.max_run_hours": "96"})
        report = report_stack(runner, "prod")
        assert "run-cost-limit" not in [v.policy for v in report.preview.violations]
        assert report.mandatory == 0
    finally:
        set_path_config(run, {"trainstack:cluster.topology": "cluster", NODES: "8"})
        set_path_config(run, {"trainstack:training.max_run_hours": "24"})
        set_path_config(run, {"trainstack:run.max_cost_usd": "10000"})

    # Back to the shipped config, the same command passes.
    proc = preview_report(run)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert "| `prod` | 1 to replace |" in proc.stdout


def test_real_prod_twice_the_tokens_shows_the_run_cost_doubling(
    real_prod: tuple[StackRun, PulumiRunner], tmp_path: Path
) -> None:
    """The forecast section from a real preview: deployed at 4 nodes with the shipped 2e10 tokens, then
    previewed at 4 nodes with 4e10 (issue #17)."""
    run, _ = real_prod
    try:
        set_path_config(run, {NODES: "4", "trainstack:training.model.tokens": "4.0e10"})
        out = tmp_path / "report.json"
        proc = preview_report(run, "--json-out", str(out))
        assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
        forecast = json.loads(out.read_text())["stacks"][0]["forecast"]
        before, after = forecast["before"], forecast["after"]
        assert before["gpus_per_job"] == after["gpus_per_job"] == 32
        # twice the training hours; prod's burn-in (training.burn_in_min, once on new nodes) is in both
        burn_h, rate = 10 / 60, before["usd_per_hour"]
        assert after["hours"] - burn_h == pytest.approx(2 * (before["hours"] - burn_h), abs=0.01)
        assert after["run_cost_usd"] - burn_h * rate == pytest.approx(
            2 * (before["run_cost_usd"] - burn_h * rate), abs=0.05
        )
        b, a = before["run_cost_usd"], after["run_cost_usd"]
        row = f"| run cost, on-demand | ${b:,.2f} | ${a:,.2f} | +${a - b:,.2f} | {(a - b) / b * 100:+.1f}% |"
        assert row in proc.stdout
        bands = [
            f"({m['total_low']:,.1f}-{m['total_high']:,.1f} GB)"
            for m in (before["memory_gb_per_gpu"], after["memory_gb_per_gpu"])
        ]
        assert (
            f"| fits the GPU's memory | yes {bands[0]} of 80 GB | yes {bands[1]} of 80 GB | | |"
            in proc.stdout
        )
        best = after["compare"]["cheapest_feasible"]
        assert f"cheapest feasible: {best['nodes']} x {best['gpus_per_node']} {best['gpu']}, " in proc.stdout
    finally:
        set_path_config(run, {NODES: "8", "trainstack:training.model.tokens": "2.0e10"})


# The stand-in program (tests/report/program): no network, and the over-budget case on the report's own
# 4 -> 12 node change (a real Instant Cluster stops at 8 nodes).


def test_prod_from_four_to_eight_nodes_adds_four_nodes_price(tmp_path: Path) -> None:
    _, runner = prepare(BY_NAME["prod-scale-up"], tmp_path)
    report = report_stack(runner, "prod")
    assert [(c.name, c.op) for c in report.preview.changes if c.op != "same"] == [("train", "update")]
    assert report.after_totals.hourly - report.before_totals.hourly == pytest.approx(4 * 8 * GPU_HOURLY)
    assert report.mandatory == 0, report.preview.violations


def test_over_budget_change_fails_the_command_and_names_the_policy(tmp_path: Path) -> None:
    cli, _ = prepare(BY_NAME["prod-over-budget"], tmp_path)
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            str(REPO / "scripts/preview-report"),
            "--cwd",
            str(cli.project),
            "--policy-config-dir",
            str(policy_configs(tmp_path)),
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
        [
            str(REPO / "scripts/preview-report"),
            *("--cwd", str(cli.project), "--policy-config-dir", str(policy_configs(tmp_path)), "prod"),
        ],
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
