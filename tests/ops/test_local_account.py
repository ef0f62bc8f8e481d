"""The local RunPod as one account: the limit is the highest declared, and a stack that does not fit gets one
line naming scripts/down instead of RunPod's bare spend-limit error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.local import FAST_ARGS, start_local_runpod
from ops.local_account import (
    account_limit,
    declared_limits,
    leftovers,
    owner,
    room_note,
    spend_by_stack,
    stack_cost,
)
from tests.emulator.conftest import H100, cluster_body

REPO_ROOT = Path(__file__).resolve().parents[2]


def _stacks(tmp_path: Path, **limits: float | None) -> Path:
    (tmp_path / "stacks").mkdir()
    for stack, limit in limits.items():
        line = f"  trainstack:runpod_spend_limit_per_hour: {limit}\n" if limit is not None else ""
        (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(f"config:\n{line}")
    return tmp_path


def test_the_account_limit_is_the_highest_a_stack_declares(tmp_path: Path) -> None:
    repo = _stacks(tmp_path, dev=None, search=150, prod=300)
    assert declared_limits(repo) == {"dev": 80.0, "prod": 300.0, "search": 150.0}
    assert account_limit(declared_limits(repo)) == 300
    assert account_limit({}) == 80  # RunPod's default


def test_committed_stacks_prod_then_dev_fit_one_account() -> None:
    # The order: prod ($255/h) still running, then dev. With the account at the highest declared
    # limit, dev fits; prod and search together do not, and that gets the one-line explanation.
    limit = account_limit(declared_limits())
    prod = {"prod": stack_cost("prod")}
    assert room_note("dev", stack_cost("dev"), limit, prod) is None
    note = room_note("search", stack_cost("search"), limit, prod)
    assert note is not None and "`scripts/down prod`" in note and "\n" not in note


def test_pod_names_map_to_their_stack() -> None:
    assert owner("trainstack-local-cpu-pod-3") == "local-cpu"
    assert owner("trainstack-prod-cluster-7") == "prod"
    assert owner("trainstack-prod-volume") == "prod"
    assert owner("someone-elses-pod") is None


LIVE = {
    "pods": [
        {"name": "trainstack-prod-cluster-0", "cost": 31.92, "clusterId": "c1", "owner": "trainstack/prod"},
        {"name": "trainstack-prod-cluster-1", "cost": 31.92, "clusterId": "c1", "owner": "trainstack/prod"},
        {
            "name": "trainstack-dev-pod-0",
            "cost": 0.0,
            "clusterId": None,
            "owner": "trainstack/dev",
        },  # stopped
        {"name": "hand-made", "cost": 2.5, "clusterId": None, "owner": None},
        # Issue #62: stack `dev-pod-0`'s pod, whose name starts like dev's: counted by its mark, as its own.
        {
            "name": "trainstack-dev-pod-0-pod-0",
            "cost": 4.0,
            "clusterId": None,
            "owner": "trainstack/dev-pod-0",
        },
        {"name": "trainstack-dev-pod-1", "cost": 1.0, "clusterId": None, "owner": None},  # a look-alike
    ],
    "clusters": [{"id": "c1", "name": "trainstack-prod-cluster"}],
    "volumes": [{"name": "trainstack-prod-volume"}],
}


def test_spend_and_leftovers_by_stack() -> None:
    assert spend_by_stack(LIVE) == {"prod": 63.84, "dev-pod-0": 4.0, "?": 3.5}
    held = leftovers(LIVE)
    assert held == {
        "prod": ["trainstack-prod-cluster", "trainstack-prod-volume"],
        "dev": ["trainstack-dev-pod-0"],
        "dev-pod-0": ["trainstack-dev-pod-0-pod-0"],
        "?": ["hand-made", "trainstack-dev-pod-1"],
    }


def test_the_note_names_what_runs_what_is_left_and_how_to_stop_it() -> None:
    note = room_note("dev", 40.0, 80.0, {"prod": 63.84, "dev": 31.92})
    assert note is not None
    assert "$80/h spend limit" in note and "prod ($63.84/h)" in note and "leaves $16.16/h" in note
    assert "'dev' needs $40.00/h" in note and "`scripts/down prod`" in note and "pulumi destroy" in note
    # The stack's own pods do not count against it (an up of a running stack keeps or replaces them).
    assert room_note("dev", 40.0, 80.0, {"dev": 79.0}) is None


@pytest.mark.services
def test_the_up_check_against_a_running_local_runpod(tmp_path: Path) -> None:
    # What `scripts/up search` runs before `pulumi up` while prod's 64 GPUs run on the local RunPod: one line
    # naming `scripts/down prod`, exit 1; dev still fits the one account ($300/h, prod's declared limit).
    server = start_local_runpod(tmp_path / "runpod", *FAST_ARGS)
    try:
        server.admin.limits(spendLimit=300)
        compute = {"gpuTypeId": H100, "gpuCountPerPod": 8, "podCount": 8}
        with server.client() as api:
            mark = {"TRAINSTACK_OWNER": "trainstack/prod"}
            body = cluster_body("trainstack-prod-cluster", compute=compute, env=mark)
            made = api.post("/v2/clusters", json=body)
            assert made.status_code == 201, made.text
        env = os.environ | server.env()

        def room(stack: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "ops.local_account", "room", stack], cwd=REPO_ROOT, env=env,
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip

        assert room("dev").returncode == 0
        full = room("search")
        assert full.returncode == 1
        (line,) = full.stderr.strip().splitlines()
        assert line.startswith("scripts/up: the local RunPod is one account with a $300/h spend limit")
        assert "prod ($255.36/h)" in line and "`scripts/down prod`" in line
    finally:
        server.stop()
