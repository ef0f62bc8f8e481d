"""What the pull-request report says a change means (issue #68): a value known only after apply is one
line, not each old entry "removed"; a row leads with what a reviewer needs; a node change in a `pods` stack
is said to be jobs, not speed, and in a cluster to be hours."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from common import contract
from common.outputs import ForecastOutput
from policy.rules.budget import RUN_COST as RUN_COST_LIMIT
from report.cli import RecordedRunner, report_stack
from report.forecast import forecast_table, jobs_line
from report.parse import UNKNOWN, UNKNOWN_SENTINEL, PolicyViolation, diff_props
from report.render import render_stack, review_rank, usd
from tests.policy.factories import check_stack, stack_resource
from tests.report.scenarios import FIXTURES

GOLDEN = Path(__file__).parent / "golden"


def test_a_delivery_whose_files_are_unknown_at_preview_is_one_line_known_after_apply() -> None:
    files = {f"train/f{i}.py": f"print({i})" for i in range(35)}
    old = {"host": "10.0.0.5", "files": files, "start_script": "start-node-0.sh"}
    new = {"host": "10.0.0.5", "files": UNKNOWN_SENTINEL, "start_script": "start-node-0.sh"}
    changes = diff_props(contract.NODE_FILES.type, old, new, [])
    assert [(c.path, c.before, c.after) for c in changes] == [("files", "(35 values)", UNKNOWN)]


def test_a_row_leads_with_what_is_rented_and_its_cost_and_the_stock_last() -> None:
    paths = ["availability.data_centers[0].id", "env.A", "image", "cost_per_hour", "gpu_count", "gpu_type_id"]
    assert sorted(paths, key=review_rank) == [
        "gpu_type_id", "gpu_count", "cost_per_hour", "image", "env.A", "availability.data_centers[0].id",
    ]  # fmt: skip
    # the shipped dev pod's create row, from a recorded preview
    row = next(
        line for line in (GOLDEN / "real-dev.md").read_text().splitlines() if "create | `dev-pod-0`" in line
    )
    props = [p.strip() for p in row.split("|")[4].split("<br>")]
    assert props[0].startswith("`gpu_type_id`") and props[1].startswith("`gpu_count`")


def _forecast(jobs: int, gpus: int, hours: float) -> ForecastOutput:
    recorded = json.loads((GOLDEN / "real-prod.json").read_text())
    stack = recorded["stacks"][0] if "stacks" in recorded else recorded
    after = stack["forecast"]["after"]
    return ForecastOutput.from_output(after | {"jobs": jobs, "gpus_per_job": gpus, "hours": hours})


def test_a_node_more_in_a_pods_stack_is_a_job_more_and_in_a_cluster_fewer_hours() -> None:
    pods = jobs_line(_forecast(1, 8, 4.0), _forecast(2, 8, 4.0))
    assert pods is not None and "**2 independent jobs** (was 1) of 8 GPUs each" in pods
    assert "not a faster run" in pods
    cluster = jobs_line(_forecast(1, 32, 37.4), _forecast(1, 64, 18.7))
    assert cluster == "one job over 64 GPUs (was 32): the nodes share the run, so its hours go 37.4 → 18.7"
    table = forecast_table(_forecast(1, 8, 4.0), _forecast(2, 8, 4.0))
    assert "| jobs × GPUs each | 1 × 8 | 2 × 8 | | |" in table  # noqa: RUF001


def test_a_pods_stack_shows_one_run_cost_in_the_headline_and_the_policy_table() -> None:
    """The recorded `search` preview (a pods stack with a model), its run-cost-limit judged over the same
    resources with a cap it exceeds: the policy table's figure is the headline's one run cost, and the
    max_run_hours figure is shown only as the bound it is."""
    report = report_stack(RecordedRunner(FIXTURES / "real-search"), "search")
    fc, run = report.preview.forecast, report.after_totals.per_run
    assert fc is not None and run is not None and report.after_totals.run_basis == "forecast"
    resources = [stack_resource(contract.COMPONENT_TYPE, "search", {"forecast": fc.to_output()})]
    resources += [
        stack_resource(c.type, c.name, {
            "cost_per_hour": c.cost_per_hour, "storage_cost_per_month": c.storage_cost_per_month,
            "training": {} if c.run_hours is None else {"max_run_hours": c.run_hours},
        })
        for c in report.preview.after
    ]  # fmt: skip
    (message,) = check_stack(RUN_COST_LIMIT, resources, {"max_run_usd": 100}).messages
    violation = PolicyViolation("run-cost-limit", "trainstack", "mandatory", None, message)
    judged = replace(report, preview=replace(report.preview, violations=(violation,)))
    md = render_stack(judged)
    headline = next(line for line in md.splitlines() if line.startswith("| per run"))
    policy_row = next(line for line in md.splitlines() if "`run-cost-limit`" in line)
    assert usd(run) in headline and f"one run costs {usd(run)} (forecast:" in policy_row
    assert "at most (stopped by the watchdog at training.max_run_hours)" in policy_row
