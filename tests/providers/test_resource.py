"""Typed resource inputs: what reaches the engine, with defaults left to the provider's model."""

from __future__ import annotations

from providers.resource import COST_KEYS
from providers.runpod.cluster import InstantCluster
from providers.runpod.inputs import ClusterNode, InstantClusterInputs, PodInputs, TrainingInputs
from providers.runpod.models import ClusterArgs, PodArgs
from providers.runpod.pod import Pod
from providers.s3.inputs import CheckpointBucketInputs, LifecycleInputs
from providers.s3.models import BucketArgs


def test_none_is_left_to_the_provider_and_nested_inputs_become_maps() -> None:
    inputs = PodInputs(
        name="p",
        image="img",
        gpu_type_id="NVIDIA H100 80GB HBM3",
        training=TrainingInputs(max_run_hours=2.0),
    )
    props = inputs.to_props()
    assert props == {
        "name": "p",
        "image": "img",
        "gpu_type_id": "NVIDIA H100 80GB HBM3",
        "training": {"max_run_hours": 2.0},
    }
    assert PodArgs.model_validate(props).ports == ["22/tcp"]  # the default lives on the provider's model


def test_every_input_field_is_a_property_the_provider_checks() -> None:
    for inputs, model in (
        (PodInputs, PodArgs),
        (InstantClusterInputs, ClusterArgs),
        (CheckpointBucketInputs, BucketArgs),
    ):
        assert set(inputs.__dataclass_fields__) <= set(model.model_fields), inputs
    bucket = CheckpointBucketInputs(bucket_name="b-1", lifecycle=LifecycleInputs(prefix="x"))
    assert BucketArgs.model_validate(bucket.to_props()).lifecycle.prefix == "x"


def test_outputs_and_costs_are_declared_once_on_the_class() -> None:
    for resource in (Pod, InstantCluster):
        assert set(COST_KEYS) <= set(resource.output_names)


def test_a_cluster_node_round_trips_through_the_output_map() -> None:
    node = ClusterNode(rank=1, pod_id="p1", ip="10.65.0.2", ssh_host="1.2.3.4", ssh_port=2222)
    assert ClusterNode.from_output(node.to_output()) == node
    assert ClusterNode.from_output({"pod_id": "p2"}).rank is None
