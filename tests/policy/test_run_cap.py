"""The run's cost caps (issue #28, #49 class 1): the H100Cluster's `run_cost_cap_usd` output (the stack's
`trainstack:run.max_cost_usd`) and each policy's own deprecated key (`run-cost-limit.max_run_usd`,
`run-cost-within-budget.max_run_cost_usd`). Where both are set the stricter holds, and the message says which
did; a key the policy file leaves at its default never competes with the stack's cap."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.outputs import ForecastMemory, ForecastOutput
from policy.rules.budget import RUN_COST as RUN_COST_LIMIT
from policy.rules.forecast import COMPONENT
from policy.rules.forecast import RUN_COST as RUN_COST_BUDGET
from tests.policy.factories import CLUSTER, check_stack, cluster, stack_resource

# A whole forecast record (the component's output, built by its own type), run cost $6,000.
FORECAST = ForecastOutput(
    gpu="H100_SXM",
    gpus_per_job=64,
    jobs=1,
    memory=ForecastMemory(parts={}, total=60.0, total_low=55.0, total_high=65.0, gpu=80.0, headroom=20.0),
    fits=True,
    verdict="fits",
    fixes=(),
    flops=1e21,
    mfu=0.4,
    hours=23.5,
    max_run_hours=48.0,
    restarts=0,
    usd_per_hour=255.36,
    run_cost_usd=6000.0,
    spot_run_cost_usd=None,
).to_output()
STACK_KEY = "trainstack:run.max_cost_usd"


def _stack(cap: float | None, forecast_usd: float = 6000.0, per_hour: float = 10.0) -> list[Any]:
    # The forecast's hours (run_cost_usd / usd_per_hour) are 10 h, its max_run_hours bound 10 h too.
    hours = {"run_cost_usd": forecast_usd, "usd_per_hour": forecast_usd / 10, "hours": 10.0}
    props: dict[str, Any] = {"forecast": FORECAST | hours}
    if cap is not None:
        props["run_cost_cap_usd"] = cap
    # 10 $/h x the forecast's 10 h: run-cost-limit judges $100 (plus the cluster's storage, none here).
    pods = cluster(cost_per_hour=per_hour, storage_cost_per_month=0.0, training={"max_run_hours": 10})
    return [stack_resource(COMPONENT, "prod", props), stack_resource(CLUSTER, "prod-cluster", pods)]


def test_old_keys_still_apply_without_a_stack_cap() -> None:
    assert check_stack(RUN_COST_BUDGET, _stack(None), {"max_run_cost_usd": 10000}).calls == []
    reports = check_stack(RUN_COST_BUDGET, _stack(None), {"max_run_cost_usd": 1000})
    assert "budget of $1,000" in reports.text and "`run-cost-within-budget.max_run_cost_usd`" in reports.text
    assert "two caps" not in reports.text
    assert check_stack(RUN_COST_BUDGET, _stack(0.0), {"max_run_cost_usd": 10000}).calls == []


def test_the_stack_cap_alone_holds_when_the_file_leaves_the_key_at_its_default() -> None:
    # The defaults ($5,000 each) were never written by the team: a higher stack cap is not overruled by them.
    assert check_stack(RUN_COST_BUDGET, _stack(7000.0), {}).calls == []
    over = check_stack(RUN_COST_BUDGET, _stack(5000.0), {})
    assert "budget of $5,000" in over.text and STACK_KEY in over.text and "two caps" not in over.text
    assert check_stack(RUN_COST_LIMIT, _stack(1_000_000.0, per_hour=1000.0), {}).calls == []


def test_a_stricter_policy_file_cap_holds_and_says_so() -> None:
    """The issue's example: the policy file's cap a cent under the run's cost; the stack's cap $100 over."""
    limit = check_stack(RUN_COST_LIMIT, _stack(200.0), {"max_run_usd": 99.99})
    assert "cap of $99.99" in limit.text, limit.text
    assert (
        "the stricter holds: `run-cost-limit.max_run_usd` in the policy config, $99.99, is under "
        in limit.text
    )
    assert f"{STACK_KEY}, $200" in limit.text and "raise `run-cost-limit.max_run_usd`" in limit.text
    budget = check_stack(RUN_COST_BUDGET, _stack(7000.0), {"max_run_cost_usd": 100})
    assert "budget of $100 (two caps apply" in budget.text, budget.text
    assert "raise `run-cost-within-budget.max_run_cost_usd`" in budget.text


def test_a_stricter_stack_cap_holds_and_says_so() -> None:
    limit = check_stack(RUN_COST_LIMIT, _stack(50.0), {"max_run_usd": 1_000_000})
    assert "cap of $50 (two caps apply and the stricter holds: trainstack:run.max_cost_usd, $50" in limit.text
    assert f"raise {STACK_KEY}" in limit.text
    assert check_stack(RUN_COST_LIMIT, _stack(100.0), {"max_run_usd": 100}).calls == []  # at the cap: fine


caps = st.one_of(st.none(), st.just(0.0), st.floats(0.01, 1e7, allow_nan=False))
file_caps = st.one_of(st.none(), st.floats(0, 1e7, allow_nan=False))


@given(stack_cap=caps, file_cap=file_caps, cost=st.floats(1, 1e7, allow_nan=False))
@pytest.mark.parametrize(
    ("policy", "key"), [(RUN_COST_LIMIT, "max_run_usd"), (RUN_COST_BUDGET, "max_run_cost_usd")]
)
def test_the_stricter_of_the_caps_that_apply_holds(
    policy: Any, key: str, stack_cap: float | None, file_cap: float | None, cost: float
) -> None:
    """Over generated caps and costs: refused exactly when the cost is over the stricter applicable cap."""
    config = {} if file_cap is None else {key: file_cap}
    if policy is RUN_COST_LIMIT:
        resources = _stack(stack_cap, per_hour=cost / 10)
        cost = round(cost, 2)
    else:
        resources = _stack(stack_cap, forecast_usd=cost)
    applicable = [c for c in (stack_cap or None, file_cap) if c is not None]
    cap = min(applicable) if applicable else 5000.0
    if stack_cap and file_cap is None:
        cap = stack_cap
    reports = check_stack(policy, resources, config)
    # The figures are rounded to cents in run-cost-limit: a cost within a cent of the cap may go either way.
    if abs(cost - cap) < 0.02:
        return
    assert bool(reports.calls) == (cost > cap), (reports.text, cap, cost)
    if reports.calls:
        both = bool(stack_cap) and file_cap is not None
        assert ("two caps apply and the stricter holds" in reports.text) == both, reports.text
        named = STACK_KEY if bool(stack_cap) and (file_cap is None or stack_cap <= file_cap) else f"{key}`"
        assert f"raise {named}" in reports.text or f"raise `{policy.name}.{named}" in reports.text, (
            reports.text
        )


@pytest.mark.parametrize(
    ("policy", "key"), [(RUN_COST_LIMIT, "max_run_usd"), (RUN_COST_BUDGET, "max_run_cost_usd")]
)
def test_the_engine_fills_no_default_for_a_deprecated_cap(policy: Any, key: str) -> None:
    """The engine hands the pack every served default as if the file had written it (seen in the real
    preview of prod: $5,000 "in the policy config" over the stack's $10,000). The deprecated caps are served
    without one, so a file that does not write them leaves the stack's cap alone."""
    served = policy.config_schema.properties
    assert "default" not in served[key]
    filled = {k: spec["default"] for k, spec in served.items() if "default" in spec}  # what the engine sends
    assert check_stack(policy, _stack(7000.0, forecast_usd=6000.0, per_hour=600.0), filled).calls == []
