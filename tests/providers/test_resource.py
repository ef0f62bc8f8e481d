"""Typed resource inputs: what reaches the engine, with defaults left to the provider's model; the provider
base's check and diff."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.output import Unknown

from providers.common import InputModel
from providers.resource import COST_KEYS, CheckedProvider
from providers.runpod.cluster import InstantCluster
from providers.runpod.inputs import InstantClusterInputs, PodInputs, TrainingInputs
from providers.runpod.models import ClusterSpec, PodSpec
from providers.runpod.outputs import ClusterNode
from providers.runpod.pod import Pod
from providers.s3.inputs import CheckpointBucketInputs, LifecycleInputs
from providers.s3.models import BucketSpec


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
    assert PodSpec.model_validate(props).ports == ["22/tcp"]  # the default lives on the provider's model


def test_every_input_field_is_a_property_the_provider_checks() -> None:
    for inputs, model in (
        (PodInputs, PodSpec),
        (InstantClusterInputs, ClusterSpec),
        (CheckpointBucketInputs, BucketSpec),
    ):
        assert set(inputs.__dataclass_fields__) <= set(model.model_fields), inputs
    bucket = CheckpointBucketInputs(bucket_name="b-1", lifecycle=LifecycleInputs(prefix="x"))
    assert BucketSpec.model_validate(bucket.to_props()).lifecycle.prefix == "x"


def test_outputs_and_costs_are_declared_once_on_the_class() -> None:
    for resource in (Pod, InstantCluster):
        assert set(COST_KEYS) <= set(resource.output_names)


def test_a_cluster_node_round_trips_through_the_output_map() -> None:
    node = ClusterNode(rank=1, pod_id="p1", ip="10.65.0.2", ssh_host="1.2.3.4", ssh_port=2222)
    assert ClusterNode.from_output(node.to_output()) == node
    assert ClusterNode.from_output({"pod_id": "p2"}).rank is None


class _Spec(InputModel):
    name: str
    size: int = 1


class _Provider(CheckedProvider):
    args_model = _Spec
    output_keys = frozenset({"thing_id"})
    computed_keys = frozenset({"cost_per_hour"})
    replace_keys = frozenset({"name"})
    delete_before_replace = True

    def computed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"cost_per_hour": 2.0 * values["size"]}


def test_the_provider_base_checks_and_diffs_inputs_only() -> None:
    provider = _Provider()
    checked = provider.check({}, {"name": "a", "thing_id": None, "cost_per_hour": 9.0, "__provider": "x"})
    assert checked.failures == [] and checked.inputs == {"name": "a", "size": 1, "cost_per_hour": 2.0}
    bad = provider.check({}, {"name": "a", "size": "big", "colour": "red"})
    assert {f.property for f in bad.failures} == {"size", "colour"} and "cost_per_hour" not in bad.inputs
    olds = {**checked.inputs, "thing_id": "t1", "__provider": "old pickle"}
    assert not provider.diff("t1", olds, {**checked.inputs, "cost_per_hour": 5.0}).changes
    grown = provider.diff("t1", olds, {**checked.inputs, "size": 2})
    assert grown.changes and grown.replaces == [] and grown.delete_before_replace is None
    renamed = provider.diff("t1", olds, {**checked.inputs, "name": "b", "size": Unknown()})
    assert renamed.replaces == ["name"] and renamed.delete_before_replace is True
