"""Budget policies: hourly burn, run cost, storage, RunPod account spend limit."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import PolicyResource

from policy.rules.budget import HOURLY_BURN, RUN_COST, RUNPOD_SPEND_LIMIT, STORAGE_COST
from tests.policy.factories import (
    BUCKET,
    CLUSTER,
    POD,
    UNKNOWN_NUM,
    VOLUME,
    bucket,
    check_stack,
    cluster,
    pod,
    stack_resource,
    volume,
)
from tests.policy.test_forecast import component, forecast_of


def _prod() -> list[PolicyResource]:
    return [stack_resource(CLUSTER, "prod-cluster", cluster()), stack_resource(BUCKET, "ckpt", bucket())]


class TestRunpodSpendLimit:
    def test_message_names_resource_dollars_and_how_to_raise(self) -> None:
        reports = check_stack(RUNPOD_SPEND_LIMIT, _prod())
        assert len(reports.calls) == 1
        message = reports.text
        assert message.startswith(
            "stack burns $255.36/h (prod-cluster: $255.36/h), $175.36/h over RunPod's account spend "
            "limit of $80/h;"
        )
        assert "RunPod support" in message and "billing settings" in message
        assert "runpod_spend_limit_per_hour" in message

    def test_raised_limit_from_config_passes(self) -> None:
        assert check_stack(RUNPOD_SPEND_LIMIT, _prod(), {"runpod_spend_limit_per_hour": 300}).calls == []

    def test_small_stack_passes_default(self) -> None:
        resources = [stack_resource(POD, "dev", pod()), stack_resource(VOLUME, "vol", volume())]
        assert check_stack(RUNPOD_SPEND_LIMIT, resources).calls == []

    def test_volume_storage_counts_hourly(self) -> None:
        resources = [stack_resource(CLUSTER, "c", cluster(cost_per_hour=79.99))]
        resources.append(stack_resource(VOLUME, "vol", volume(storage_cost_per_month=73.0)))
        reports = check_stack(RUNPOD_SPEND_LIMIT, resources)
        assert "stack burns $80.09/h (c: $79.99/h, vol: $0.10/h)" in reports.text


class TestHourlyBurn:
    def test_under_cap_passes(self) -> None:
        assert check_stack(HOURLY_BURN, _prod(), {"max_hourly_usd": 280}).calls == []

    def test_over_cap_names_resources_and_dollars(self) -> None:
        resources = [stack_resource(POD, f"p{i}", pod(storage_cost_per_month=0.0)) for i in range(3)]
        reports = check_stack(HOURLY_BURN, resources, {"max_hourly_usd": 60})
        assert reports.text.startswith(
            "stack burns $95.76/h (p0: $31.92/h, p1: $31.92/h, p2: $31.92/h), $35.76/h over the "
            "configured cap of $60/h."
        )


class TestRunCost:
    def test_without_a_model_one_run_is_max_run_hours_said_as_such(self) -> None:
        reports = check_stack(RUN_COST, _prod(), {"max_run_usd": 3000})
        # 255.36 $/h x 12 h = 3064.32: no forecast, so one run is the bound, and the message says so
        assert reports.text.startswith(
            "one run costs $3,064.32 at its longest (no training.model to forecast: $/h x "
            "training.max_run_hours, where the watchdog stops it; prod-cluster: $255.36/h x 12 h)"
        )
        assert "$64.32 over the configured cap of $3,000" in reports.text

    def test_under_cap_passes(self) -> None:
        assert check_stack(RUN_COST, _prod(), {"max_run_usd": 3100}).calls == []

    def test_with_a_model_one_run_is_the_forecasts_and_max_run_hours_only_the_bound(self) -> None:
        # a pods stack's two 8-GPU pods (2 x $31.93/h) and the component's forecast (issue #68: the policy
        # said $127.71 where the report's headline said $47.39)
        fc = forecast_of()
        hours = fc["run_cost_usd"] / fc["usd_per_hour"]
        pods = [
            stack_resource(POD, f"dev-pod-{i}", pod(cost_per_hour=31.93, storage_cost_per_month=0.0))
            for i in range(2)
        ]
        resources = [component(fc), *pods]
        one_run = round(2 * 31.93 * hours, 2)
        (message,) = check_stack(RUN_COST, resources, {"max_run_usd": one_run - 0.01}).messages
        assert message.startswith(
            f"one run costs ${one_run:,.2f} (forecast: {hours:,.1f} h of training x $63.86/h)"
        )
        assert "at most (stopped by the watchdog at training.max_run_hours) it would cost $638.60" in message
        # the bound over the cap, the forecast under it: one run fits
        assert check_stack(RUN_COST, resources, {"max_run_usd": one_run}).calls == []

    def test_volumes_bill_for_the_longest_run(self) -> None:
        resources = [
            stack_resource(POD, "p", pod(storage_cost_per_month=0.0)),
            stack_resource(VOLUME, "vol", volume(storage_cost_per_month=730.0)),
        ]
        reports = check_stack(RUN_COST, resources, {"max_run_usd": 100})
        assert "vol: $1/h x 10 h" in reports.text and "$329.20" in reports.text

    def test_default_hours_when_none_declared(self) -> None:
        resources = [stack_resource(POD, "p", pod(training={}, storage_cost_per_month=0.0))]
        reports = check_stack(RUN_COST, resources, {"max_run_usd": 100, "default_run_hours": 5})
        assert "assumed 5 h" in reports.text and "$159.60" in reports.text


class TestStorageCost:
    def test_under_cap_passes(self) -> None:
        assert check_stack(STORAGE_COST, [stack_resource(VOLUME, "vol", volume())]).calls == []

    def test_over_cap_names_volumes_and_dollars(self) -> None:
        resources = [
            stack_resource(VOLUME, "big", volume(storage_cost_per_month=250.0)),
            stack_resource(POD, "p", pod(storage_cost_per_month=5.0)),
        ]
        reports = check_stack(STORAGE_COST, resources, {"max_storage_monthly_usd": 200})
        assert reports.text.startswith(
            "storage costs $255/month (big: $250/month, p: $5/month), $55/month over the configured cap "
            "of $200/month."
        )


# Issue #34, class 2: a cost that cannot be known fails every money policy closed, never open.
_UNPRICED: list[tuple[str, PolicyResource]] = [
    ("unknown pod cost", stack_resource(POD, "p", pod(cost_per_hour=UNKNOWN_NUM))),
    ("unknown cluster cost", stack_resource(CLUSTER, "c", cluster(cost_per_hour=UNKNOWN_NUM))),
    ("unknown volume storage", stack_resource(VOLUME, "v", volume(storage_cost_per_month=UNKNOWN_NUM))),
    ("pod cost missing", stack_resource(POD, "p", {k: v for k, v in pod().items() if k != "cost_per_hour"})),
    ("pod cost a string", stack_resource(POD, "p", pod(cost_per_hour="cheap"))),
    ("pod cost NaN", stack_resource(POD, "p", pod(cost_per_hour=float("nan")))),
    ("pod cost infinite", stack_resource(POD, "p", pod(cost_per_hour=float("inf")))),
    ("pod cost a boolean", stack_resource(POD, "p", pod(cost_per_hour=True))),
]
_GENEROUS = {
    HOURLY_BURN: {"max_hourly_usd": 1e6},
    RUN_COST: {"max_run_usd": 1e9},
    STORAGE_COST: {"max_storage_monthly_usd": 1e6},
    RUNPOD_SPEND_LIMIT: {"runpod_spend_limit_per_hour": 1e6},
}


@pytest.mark.parametrize("policy", list(_GENEROUS), ids=lambda p: p.name)
@pytest.mark.parametrize(("what", "resource"), _UNPRICED, ids=[r[0] for r in _UNPRICED])
def test_a_cost_that_cannot_be_known_fails_closed(what: str, resource: PolicyResource, policy: Any) -> None:
    reports = check_stack(policy, [resource, *_prod()], _GENEROUS[policy])
    assert len(reports.calls) == 1, what
    assert "is not known, so the budget cannot be checked" in reports.text


class TestNoDoubleCounting:
    """The stack and the H100Cluster component re-export their children's cost; only providers are billed."""

    def test_component_and_stack_outputs_are_not_counted_again(self) -> None:
        billed = stack_resource(POD, "dev-pod-0", pod(cost_per_hour=31.92))
        component = stack_resource("trainstack:index:H100Cluster", "dev", {"cost_per_hour": 31.92})
        stack = stack_resource("pulumi:pulumi:Stack", "trainstack-dev", {"cost_per_hour": 31.92})
        assert check_stack(HOURLY_BURN, [billed, component, stack], {"max_hourly_usd": 40}).calls == []
        over = check_stack(HOURLY_BURN, [billed, component, stack], {"max_hourly_usd": 30}).text
        assert "stack burns $31.93/h (dev-pod-0: $31.93/h)" in over  # + storage / 730 h


def test_non_finite_thresholds_are_invalid_config() -> None:
    """A NaN cap compares false both ways: it must be reported, never a cap that lets everything through."""
    for value in (float("nan"), float("inf"), "nan"):
        reports = check_stack(HOURLY_BURN, _prod(), {"max_hourly_usd": value})
        assert "policy config is invalid" in reports.text and "max_hourly_usd" in reports.text, value
