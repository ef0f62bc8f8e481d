"""`trainstack:recovery` (issue #29): defaults, key-path errors, and the data center order new pods get."""

from __future__ import annotations

from typing import Any

import pytest

from components.cluster import _container_fields, _pod_inputs
from providers.runpod.pod import PodProvider
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config
from stackconfig.supervisor import data_center_order


def test_defaults() -> None:
    r = load_stack_config({}).recovery
    assert (r.enabled, r.hang_after_min, r.unreachable_rounds, r.max_recoveries, r.backoff_min) == (
        True, 10.0, 2, 3, 10.0,
    )  # fmt: skip
    assert (r.straggler_tolerance_pct, r.straggler_for_min, r.avoid_data_centers) == (20.0, 10.0, ())


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"recovery": {"hang_after_min": 0}}, "trainstack:recovery.hang_after_min"),
        ({"recovery": {"unreachable_rounds": 0}}, "trainstack:recovery.unreachable_rounds"),
        ({"recovery": {"max_recoveries": -1}}, "trainstack:recovery.max_recoveries"),
        ({"recovery": {"straggler_tolerance_pct": 0}}, "trainstack:recovery.straggler_tolerance_pct"),
        ({"recovery": {"backof_min": 3}}, "trainstack:recovery.backof_min"),
        ({"run": {"phase": "recoverd"}}, "trainstack:run.phase"),
    ],
)
def test_bad_values_name_their_key(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw)
    assert path in str(err.value)


def test_the_alerts_stall_and_the_supervisors_hang_are_two_keys_with_their_own_defaults() -> None:
    """trainstack:alerts.stalled_after_min (15) tells a person; trainstack:recovery.hang_after_min (10,
    PyTorch's NCCL timeout) makes the supervisor act. The recovery key's old name loads, with a warning."""
    config = load_stack_config({})
    assert (config.alerts.stalled_after_min, config.recovery.hang_after_min) == (15.0, 10.0)
    warnings: list[str] = []
    old = load_stack_config({"recovery": {"stalled_after_min": 12}}, warn=warnings.append)
    assert old.recovery.hang_after_min == 12.0 and old.alerts.stalled_after_min == 15.0
    assert warnings == [
        "trainstack:recovery.stalled_after_min is deprecated (it is the supervisor's hang, not the alert's "
        "stall); rename it to hang_after_min"
    ]
    with pytest.raises(ConfigError, match="keep only hang_after_min"):
        load_stack_config({"recovery": {"stalled_after_min": 12, "hang_after_min": 10}})


def test_the_avoided_data_center_goes_last_for_new_pods_and_placed_pods_stay() -> None:
    cfg = load_stack_config(
        {
            "cluster": {"data_centers": ["US-TX-3", "EU-RO-1", "US-GA-2"]},
            "recovery": {"avoid_data_centers": ["US-TX-3"]},
        }
    )
    inputs = _pod_inputs("search", 0, cfg, _container_fields("search", cfg, None))
    assert list(inputs.data_center_ids) == ["EU-RO-1", "US-GA-2", "US-TX-3"]  # type: ignore[arg-type]
    assert data_center_order(["A", "B"], ["B", "C"]) == ("A", "B")
    # The order alone never replaces a placed pod; a different set still does.
    old = {"data_center_ids": ["US-TX-3", "EU-RO-1", "US-GA-2"]}
    assert PodProvider().diff("p", old, {"data_center_ids": ["EU-RO-1", "US-GA-2", "US-TX-3"]}).replaces == []
    assert PodProvider().diff("p", old, {"data_center_ids": ["EU-RO-1"]}).replaces == ["data_center_ids"]
