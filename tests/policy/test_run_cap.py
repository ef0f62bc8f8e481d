"""The run's one cost cap (`trainstack:run.max_cost_usd`, issue #28): the H100Cluster's `run_cost_cap_usd`
output wins over both policies' old keys, which still apply when the stack sets no cap."""

from __future__ import annotations

from typing import Any

from policy.rules.budget import RUN_COST as RUN_COST_LIMIT
from policy.rules.forecast import COMPONENT
from policy.rules.forecast import RUN_COST as RUN_COST_BUDGET
from tests.policy.factories import CLUSTER, check_stack, cluster, stack_resource

FORECAST = {"run_cost_usd": 6000.0, "hours": 23.5, "usd_per_hour": 255.36, "flops": 1e21, "mfu": 0.4}


def _stack(cap: float | None) -> list[Any]:
    props: dict[str, Any] = {"forecast": FORECAST}
    if cap is not None:
        props["run_cost_cap_usd"] = cap
    return [stack_resource(COMPONENT, "prod", props), stack_resource(CLUSTER, "prod-cluster", cluster())]


def test_old_keys_still_apply_without_a_stack_cap() -> None:
    assert check_stack(RUN_COST_BUDGET, _stack(None), {"max_run_cost_usd": 10000}).calls == []
    reports = check_stack(RUN_COST_BUDGET, _stack(None), {"max_run_cost_usd": 1000})
    assert "budget of $1,000" in reports.text and "`max_run_cost_usd` in the policy config" in reports.text
    assert check_stack(RUN_COST_BUDGET, _stack(0.0), {"max_run_cost_usd": 10000}).calls == []


def test_the_stack_cap_wins_over_both_policies_keys() -> None:
    over = check_stack(RUN_COST_BUDGET, _stack(5000.0), {"max_run_cost_usd": 10000})
    assert "budget of $5,000" in over.text and "trainstack:run.max_cost_usd" in over.text
    assert check_stack(RUN_COST_BUDGET, _stack(7000.0), {"max_run_cost_usd": 100}).calls == []
    limit = check_stack(RUN_COST_LIMIT, _stack(100.0), {"max_run_usd": 1_000_000})
    assert "cap of $100" in limit.text and "trainstack:run.max_cost_usd" in limit.text
    assert check_stack(RUN_COST_LIMIT, _stack(1_000_000.0), {"max_run_usd": 1}).calls == []
