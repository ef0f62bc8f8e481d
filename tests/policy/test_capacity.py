"""Capacity-mix policies: spot share, multi-node on demand, spot checkpointing."""

from __future__ import annotations

from policy.rules.capacity import MULTI_NODE_ON_DEMAND, SPOT_CHECKPOINTING, SPOT_SHARE
from tests.policy.factories import (
    CLUSTER,
    POD,
    UNKNOWN_NUM,
    UNKNOWN_STR,
    check_resource,
    check_stack,
    cluster,
    pod,
    stack_resource,
)


def _pods(*capacities: str, hours: float | str = 10.0) -> list:
    return [
        stack_resource(POD, f"p{i}", pod(capacity=cap, training={"max_run_hours": hours}))
        for i, cap in enumerate(capacities)
    ]


class TestSpotShare:
    def test_half_on_spot_passes_at_default(self) -> None:
        assert check_stack(SPOT_SHARE, _pods("spot", "on_demand")).calls == []

    def test_too_much_spot_fails_naming_pods_and_share(self) -> None:
        reports = check_stack(SPOT_SHARE, _pods("spot", "auto", "on_demand"))
        assert len(reports.calls) == 2  # GPUs and GPU-hours
        assert "16 of 24 GPUs (67%)" in reports.messages[0]
        assert "p0 (8 GPUs)" in reports.messages[0] and "p1 (8 GPUs)" in reports.messages[0]
        assert "GPU-hours" in reports.messages[1]
        assert "max_spot_share" in reports.text

    def test_cluster_gpus_count_as_on_demand(self) -> None:
        resources = [*_pods("spot"), stack_resource(CLUSTER, "c", cluster())]
        assert check_stack(SPOT_SHARE, resources).calls == []

    def test_gpu_hours_share_counts_run_length(self) -> None:
        resources = [
            stack_resource(POD, "long-spot", pod(capacity="spot", training={"max_run_hours": 100.0})),
            stack_resource(POD, "short", pod(training={"max_run_hours": 1.0})),
        ]
        reports = check_stack(SPOT_SHARE, resources, {"max_spot_share": 0.6})
        assert len(reports.calls) == 1 and "GPU-hours" in reports.text

    def test_auto_not_counted_when_configured(self) -> None:
        reports = check_stack(SPOT_SHARE, _pods("auto", "auto"), {"count_auto_as_spot": False})
        assert reports.calls == []

    def test_unknown_capacity_and_hours_are_tolerated(self) -> None:
        resources = [
            stack_resource(POD, "a", pod(capacity=UNKNOWN_STR, gpu_count=UNKNOWN_NUM)),
            *_pods("spot", "on_demand", hours=UNKNOWN_NUM),
        ]
        assert check_stack(SPOT_SHARE, resources).calls == []

    def test_invalid_config_is_reported_not_raised(self) -> None:
        reports = check_stack(SPOT_SHARE, _pods("spot"), {"max_spot_share": 2, "typo": 1})
        assert "max_spot_share" in reports.text and "typo" in reports.text


class TestMultiNodeOnDemand:
    def test_plain_cluster_passes(self) -> None:
        assert check_resource(MULTI_NODE_ON_DEMAND, CLUSTER, cluster()).calls == []

    def test_cluster_marked_spot_fails(self) -> None:
        reports = check_resource(MULTI_NODE_ON_DEMAND, CLUSTER, cluster(capacity="spot", bid_per_gpu=2.0))
        assert len(reports.calls) == 1
        assert "capacity 'spot' and bid_per_gpu" in reports.text and "on-demand only" in reports.text

    def test_multi_node_pod_on_spot_fails(self) -> None:
        props = pod(capacity="auto", env={"NUM_NODES": "4"})
        reports = check_resource(MULTI_NODE_ON_DEMAND, POD, props, name="node-1")
        assert "pod 'node-1' is one node of a 4-node training job" in reports.text
        assert "InstantCluster" in reports.text

    def test_single_node_spot_pod_passes(self) -> None:
        props = pod(capacity="spot", env={"NUM_NODES": "1"})
        assert check_resource(MULTI_NODE_ON_DEMAND, POD, props).calls == []

    def test_unknown_env_is_tolerated(self) -> None:
        props = pod(capacity="spot", env={"NUM_NODES": UNKNOWN_STR})
        assert check_resource(MULTI_NODE_ON_DEMAND, POD, props).calls == []
        assert check_resource(MULTI_NODE_ON_DEMAND, POD, pod(env=UNKNOWN_STR)).calls == []


class TestSpotCheckpointing:
    def test_on_demand_pod_needs_nothing(self) -> None:
        assert check_resource(SPOT_CHECKPOINTING, POD, pod(training={})).calls == []

    def test_spot_pod_with_bucket_and_short_interval_passes(self) -> None:
        assert check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="spot")).calls == []

    def test_spot_pod_without_bucket_or_interval_fails(self) -> None:
        reports = check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="spot", training={}))
        assert len(reports.calls) == 2
        assert "sets no training.checkpoint_bucket" in reports.messages[0]
        assert "sets no training.checkpoint_interval_s" in reports.messages[1]

    def test_long_interval_fails_and_explains_notice(self) -> None:
        training = {"checkpoint_bucket": "ckpt", "checkpoint_interval_s": 3600.0}
        reports = check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="auto", training=training))
        assert len(reports.calls) == 1
        assert "every 3600 s" in reports.text and "maximum is 900 s" in reports.text
        assert "5 seconds' notice" in reports.text and "last timed checkpoint" in reports.text

    def test_interval_limit_comes_from_config(self) -> None:
        training = {"checkpoint_bucket": "ckpt", "checkpoint_interval_s": 600.0}
        config = {"max_checkpoint_interval_s": 300}
        reports = check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="spot", training=training), config)
        assert "maximum is 300 s" in reports.text

    def test_unknown_values_are_tolerated(self) -> None:
        training = {"checkpoint_bucket": UNKNOWN_STR, "checkpoint_interval_s": UNKNOWN_NUM}
        assert check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="spot", training=training)).calls == []
        assert check_resource(SPOT_CHECKPOINTING, POD, pod(capacity=UNKNOWN_STR, training={})).calls == []
        assert check_resource(SPOT_CHECKPOINTING, POD, pod(capacity="spot", training=UNKNOWN_STR)).calls == []
