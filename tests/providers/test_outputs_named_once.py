"""Each resource names its outputs once, as `pulumi.Output[...]` attributes: its `output_names` and its
provider's `output_keys` (what diff ignores) come from them (providers/resource.py)."""

from __future__ import annotations

from typing import ClassVar

import pulumi
import pytest

from common.contract import COST_KEYS
from providers.delivery.node_files import NodeFiles
from providers.resource import TypedResource
from providers.runpod.cluster import InstantCluster
from providers.runpod.pod import Pod
from providers.runpod.registry import RegistryAuth
from providers.runpod.secret import Secret
from providers.runpod.volume import NetworkVolume
from providers.s3.bucket import CheckpointBucket

RESOURCES = (Pod, InstantCluster, NetworkVolume, Secret, RegistryAuth, CheckpointBucket, NodeFiles)


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.__name__)
def test_the_output_attributes_are_the_one_list(resource: type[TypedResource]) -> None:
    provider = resource.provider_factory
    declared = {k for k, kind in vars(resource)["__annotations__"].items() if "pulumi.Output[" in str(kind)}
    assert set(resource.output_names) == declared
    keys = provider.output_keys  # type: ignore[attr-defined]
    inputs = set(provider.args_model.model_fields)  # type: ignore[attr-defined]
    assert keys and keys <= declared and not keys & inputs and not keys & set(COST_KEYS)
    # a secret output is declared too (or is a secret input), so it is never left out of either list
    assert set(resource.secret_outputs) <= declared | inputs


def test_a_new_resource_gives_its_provider_the_outputs_that_are_not_inputs() -> None:
    class Thing(TypedResource, module="test", name="Thing"):
        provider_factory = type("ThingProvider", (Pod.provider_factory,), {})
        made_id: pulumi.Output[str]
        image: pulumi.Output[str]  # an input the provider echoes: diff still compares it
        cost_per_hour: pulumi.Output[float]
        note: ClassVar[str] = "not an output"

    assert Thing.output_names == ("made_id", "image", "cost_per_hour")
    assert Thing.provider_factory.output_keys == frozenset({"made_id"})  # type: ignore[attr-defined]
