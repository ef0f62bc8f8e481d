"""`capacity-available` (advisory): RunPod's stock per candidate data center, as the providers' check()
records it in `availability`; a failed read is said, never a block."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel

from policy.rules.availability import CAPACITY_AVAILABLE
from policy.stock import TIMES, describe
from tests.policy.factories import CLUSTER, POD, UNKNOWN_STR, check_stack, pod, stack_resource

H100 = "NVIDIA H100 80GB HBM3"


def stock(*levels: tuple[str, str | None], nodes: int = 8, error: str | None = None) -> dict[str, Any]:
    return {
        "gpu_type_id": H100,
        "gpu_count": 8,
        "nodes": nodes,
        "product": "CLUSTER",
        "read": error is None,
        "error": error,
        "data_centers": [{"id": dc, "availability": level} for dc, level in levels],
        "chosen": None,
    }


def cluster(availability: Any) -> Any:
    props = {"name": "c", "gpu_type_id": H100, "gpu_count_per_pod": 8.0, "pod_count": 8.0}
    return stack_resource(CLUSTER, "prod-cluster", {**props, "availability": availability})


def test_it_is_advisory() -> None:
    assert CAPACITY_AVAILABLE.enforcement_level is EnforcementLevel.ADVISORY


def test_none_free_in_a_candidate_is_said_with_every_level() -> None:
    reports = check_stack(CAPACITY_AVAILABLE, [cluster(stock(("EU-RO-1", "NONE"), ("US-TX-3", "LOW")))])
    assert len(reports.messages) == 1
    assert reports.text.startswith(f"8 {TIMES} 8 H100 SXM: none free in EU-RO-1, LOW in US-TX-3.")
    assert "falls back along trainstack:cluster.data_centers" in reports.text


def test_stock_everywhere_is_silent_and_the_floor_is_configurable() -> None:
    free = cluster(stock(("US-TX-3", "HIGH"), ("EU-RO-1", "LOW")))
    assert check_stack(CAPACITY_AVAILABLE, [free]).messages == []
    strict = check_stack(CAPACITY_AVAILABLE, [free], {"warn_below": "MEDIUM"})
    assert strict.text.startswith(f"8 {TIMES} 8 H100 SXM: HIGH in US-TX-3, LOW in EU-RO-1.")


def test_a_failed_read_is_said_and_never_blocks() -> None:
    failed = cluster(stock(error="the catalog could not be read (ServerError)", nodes=8))
    reports = check_stack(CAPACITY_AVAILABLE, [failed])
    assert reports.messages == [
        f"8 {TIMES} 8 H100 SXM: capacity could not be read (the catalog could not be read (ServerError)); "
        "advisory only, nothing is blocked."
    ]


def test_pods_of_one_shape_are_counted_together() -> None:
    row = {**stock(("EU-RO-1", "NONE"), nodes=1), "product": "POD"}
    pods = [stack_resource(POD, f"search-pod-{i}", pod(availability=row)) for i in range(4)]
    assert check_stack(CAPACITY_AVAILABLE, pods).text.startswith(
        f"4 {TIMES} 8 H100 SXM: none free in EU-RO-1."
    )


def test_unknown_or_missing_reads_are_skipped() -> None:
    resources = [cluster(UNKNOWN_STR), cluster(None), stack_resource(POD, "p", pod())]
    assert check_stack(CAPACITY_AVAILABLE, resources).messages == []


def test_a_bad_config_is_reported_naming_the_key() -> None:
    reports = check_stack(CAPACITY_AVAILABLE, [], {"warn_below": "SOME"})
    assert "warn_below" in reports.text


def test_the_line_groups_levels_and_says_where_a_volume_placed_it() -> None:
    row = {**stock(("EU-RO-1", "NONE"), ("US-KS-2", "NONE"), ("US-TX-3", "LOW")), "chosen": "US-TX-3"}
    assert (
        describe(row)
        == f"8 {TIMES} 8 H100 SXM: none free in EU-RO-1, US-KS-2, LOW in US-TX-3 (placed in US-TX-3)"
    )
    assert describe(stock()) == f"8 {TIMES} 8 H100 SXM: none free in any data center RunPod lists for it"
