"""Values other resources have not computed yet reach check()/diff() as `pulumi.output.Unknown` objects.

Found with the real CLI: at `pulumi preview` of prod the cluster's `volume_id` (the volume's output) arrived
as an Unknown object, and check() failed it as "not a valid string".
"""

from __future__ import annotations

from typing import Any

from pulumi.output import Unknown

from providers.common import contains_unknown, is_unknown
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.pod import PodProvider


def _cluster(**overrides: Any) -> dict[str, Any]:
    news: dict[str, Any] = {
        "name": "trainstack-prod-cluster",
        "cluster_type": "TRAINING",
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "gpu_count_per_pod": 8.0,
        "pod_count": 8.0,
        "image": "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
        "data_center_id": "US-TX-3",
        "volume_mount_path": "/workspace",
        "start_ssh": True,
    }
    news.update(overrides)
    return news


def test_unknown_objects_and_sentinels_are_unknown() -> None:
    assert is_unknown(Unknown())
    assert contains_unknown({"env": {"A": Unknown()}})
    assert contains_unknown([1, [Unknown()]])
    assert not contains_unknown({"env": {"A": "b"}, "ports": ["22/tcp"]})


def test_cluster_check_tolerates_an_unknown_volume_id() -> None:
    result = InstantClusterProvider().check({}, _cluster(volume_id=Unknown()))
    assert result.failures == []
    assert isinstance(result.inputs["volume_id"], Unknown)


def test_an_unknown_nested_value_is_not_a_failure_and_a_real_error_still_is() -> None:
    result = InstantClusterProvider().check({}, _cluster(env={"HF_TOKEN": Unknown()}, pod_count=9.0))
    assert [f.property for f in result.failures] == ["pod_count"]


def test_diff_reports_a_change_when_a_new_value_is_unknown() -> None:
    olds = {"name": "p", "image": "a", "env": {"A": "1"}}
    diff = PodProvider().diff("id", olds, {**olds, "env": {"A": Unknown()}})
    assert diff.changes is True
