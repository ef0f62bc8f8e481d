"""The RunPod names a stack owns are built and recognised in one module: every name H100Cluster gives is
claimed by its own stack only, and maps back to it."""

from __future__ import annotations

import pytest

from components import names

STACKS = ("dev", "dev-2", "local-cpu", "prod")


def _given(stack: str) -> dict[str, list[str]]:
    return {
        "cluster": [names.cluster_name(stack)],
        "pod": [names.pod_name(stack, i) for i in (0, 7, 63)],
        "volume": [names.volume_name(stack)],
        "secret": [names.secret_name(stack, env) for env in ("HF_TOKEN", "AWS_ACCESS_KEY_ID")],
    }


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_claims_every_name_it_gives_and_no_other_stacks(stack: str) -> None:
    owned = names.owned_names(stack)
    for kind, given in _given(stack).items():
        assert all(owned[kind](n) for n in given), (kind, given)
    for other in STACKS:
        if other == stack:
            continue
        for kind, given in _given(other).items():
            assert not any(owned[kind](n) for n in given), (stack, other, kind, given)


@pytest.mark.parametrize("stack", STACKS)
def test_a_name_maps_back_to_its_stack(stack: str) -> None:
    for kind in ("cluster", "pod", "volume"):
        for name in _given(stack)[kind]:
            assert names.owner(name) == stack, name
    assert names.owner(f"{names.cluster_name(stack)}-3") == stack  # an Instant Cluster's member pod
    assert names.owner("someone-elses-pod") is None


def test_the_shapes_are_the_ones_runpod_holds() -> None:
    assert names.pod_name("prod", 3) == "trainstack-prod-pod-3"
    assert names.cluster_name("prod") == "trainstack-prod-cluster"
    assert names.volume_name("prod") == "trainstack-prod-volume"
    assert names.secret_name("prod", "HF_TOKEN") == "trainstack-prod-hf_token"
    assert names.registry_name("prod", "ghcr") == "trainstack-prod-ghcr"
