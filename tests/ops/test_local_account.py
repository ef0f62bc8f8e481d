"""The local RunPod as one account: the limit is the highest declared, and a stack that does not fit gets one
line naming scripts/down instead of RunPod's bare spend-limit error."""

from __future__ import annotations

from pathlib import Path

from ops.local_account import (
    account_limit,
    declared_limits,
    leftovers,
    owner,
    room_note,
    spend_by_stack,
    stack_cost,
)


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
        {"name": "trainstack-prod-cluster-0", "cost": 31.92, "clusterId": "c1"},
        {"name": "trainstack-prod-cluster-1", "cost": 31.92, "clusterId": "c1"},
        {"name": "trainstack-dev-pod-0", "cost": 0.0, "clusterId": None},  # stopped: not billed
        {"name": "hand-made", "cost": 2.5, "clusterId": None},
    ],
    "clusters": [{"name": "trainstack-prod-cluster"}],
    "volumes": [{"name": "trainstack-prod-volume"}],
}


def test_spend_and_leftovers_by_stack() -> None:
    assert spend_by_stack(LIVE) == {"prod": 63.84, "?": 2.5}
    held = leftovers(LIVE)
    assert held == {
        "prod": ["trainstack-prod-cluster", "trainstack-prod-volume"],
        "dev": ["trainstack-dev-pod-0"],
        "?": ["hand-made"],
    }


def test_the_note_names_what_runs_what_is_left_and_how_to_stop_it() -> None:
    note = room_note("dev", 40.0, 80.0, {"prod": 63.84, "dev": 31.92})
    assert note is not None
    assert "$80/h spend limit" in note and "prod ($63.84/h)" in note and "leaves $16.16/h" in note
    assert "'dev' needs $40.00/h" in note and "`scripts/down prod`" in note and "pulumi destroy" in note
    # The stack's own pods do not count against it (an up of a running stack keeps or replaces them).
    assert room_note("dev", 40.0, 80.0, {"dev": 79.0}) is None
