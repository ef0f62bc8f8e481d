"""Placement policies: volume data center, GPU types, global networking for multi-node jobs, CUDA."""

from __future__ import annotations

from pulumi_policy import PolicyResource

from policy.rules.placement import (
    ALLOWED_GPU_TYPES,
    MIN_CUDA_VERSION,
    NO_GLOBAL_NETWORKING_TRAINING,
    SAME_DATA_CENTER,
)
from tests.policy.factories import (
    CLUSTER,
    POD,
    UNKNOWN_STR,
    VOLUME,
    check_resource,
    check_stack,
    cluster,
    pod,
    stack_resource,
    volume,
)


class TestSameDataCenter:
    def test_preview_resolves_volume_through_property_dependencies(self) -> None:
        vol = stack_resource(VOLUME, "data", volume(data_center_id="US-TX-3"))
        trainer = stack_resource(
            POD,
            "trainer",
            pod(volume_id=UNKNOWN_STR, data_center_ids=["EU-RO-1"]),
            dependencies=[vol],
            property_dependencies={"volume_id": [vol]},
        )
        reports = check_stack(SAME_DATA_CENTER, [vol, trainer])
        assert len(reports.calls) == 1
        message, urn = reports.calls[0]
        assert "pod 'trainer' mounts network volume 'data' in US-TX-3 but is placed in EU-RO-1" in message
        assert "data_center_ids to ['US-TX-3']" in message
        assert urn == trainer.urn

    def test_after_create_matches_by_volume_id(self) -> None:
        vol = stack_resource(VOLUME, "data", volume(volume_id="vol-1", data_center_id="US-TX-3"))
        other = stack_resource(VOLUME, "other", volume(volume_id="vol-2", data_center_id="EU-RO-1"))
        c = stack_resource(CLUSTER, "c", cluster(volume_id="vol-1", data_center_id="EU-RO-1"))
        reports = check_stack(SAME_DATA_CENTER, [vol, other, c])
        assert len(reports.calls) == 1 and "'data' in US-TX-3" in reports.text
        assert "data_center_id to ['US-TX-3']" in reports.text

    def test_same_data_center_passes(self) -> None:
        vol = stack_resource(VOLUME, "data", volume())
        trainer = stack_resource(
            POD, "t", pod(volume_id=UNKNOWN_STR), property_dependencies={"volume_id": [vol]}
        )
        assert check_stack(SAME_DATA_CENTER, [vol, trainer]).calls == []

    def test_lone_volume_dependency_is_the_fallback(self) -> None:
        vol = stack_resource(VOLUME, "data", volume(data_center_id="US-TX-3"))
        trainer = stack_resource(POD, "t", pod(volume_id=UNKNOWN_STR), dependencies=[vol])
        assert len(check_stack(SAME_DATA_CENTER, [vol, trainer]).calls) == 1

    def test_unpinned_pod_fails_unless_configured(self) -> None:
        vol = stack_resource(VOLUME, "data", volume())
        trainer = stack_resource(
            POD,
            "t",
            pod(volume_id=UNKNOWN_STR, data_center_ids=[]),
            property_dependencies={"volume_id": [vol]},
        )
        assert "names no data center" in check_stack(SAME_DATA_CENTER, [vol, trainer]).text
        assert check_stack(SAME_DATA_CENTER, [vol, trainer], {"require_pinned": False}).calls == []

    def test_unknowns_and_outside_volumes_are_tolerated(self) -> None:
        vol = stack_resource(VOLUME, "data", volume(data_center_id=UNKNOWN_STR))
        a = stack_resource(POD, "a", pod(volume_id=UNKNOWN_STR), property_dependencies={"volume_id": [vol]})
        known = stack_resource(VOLUME, "k", volume(data_center_id="US-TX-3"))
        b = stack_resource(
            POD, "b", pod(volume_id=UNKNOWN_STR, data_center_ids=UNKNOWN_STR), dependencies=[known]
        )
        external = stack_resource(POD, "c", pod(volume_id="vol-existing"), dependencies=[known])
        assert check_stack(SAME_DATA_CENTER, [vol, a, known, b, external]).calls == []


class TestAllowedGpuTypes:
    def test_h100_passes_by_default(self) -> None:
        assert check_resource(ALLOWED_GPU_TYPES, POD, pod()).calls == []
        assert check_resource(ALLOWED_GPU_TYPES, CLUSTER, cluster()).calls == []

    def test_other_gpu_fails(self) -> None:
        reports = check_resource(ALLOWED_GPU_TYPES, POD, pod(gpu_type_id="NVIDIA A100-SXM4-80GB"), name="p")
        assert "pod 'p' asks for GPU type 'NVIDIA A100-SXM4-80GB'" in reports.text
        assert "allowed_gpu_types" in reports.text

    def test_list_comes_from_config(self) -> None:
        config = {"allowed_gpu_types": ["NVIDIA B200"]}
        assert check_resource(ALLOWED_GPU_TYPES, POD, pod(gpu_type_id="NVIDIA B200"), config).calls == []
        assert len(check_resource(ALLOWED_GPU_TYPES, CLUSTER, cluster(), config).calls) == 1

    def test_unknown_gpu_is_tolerated(self) -> None:
        assert check_resource(ALLOWED_GPU_TYPES, POD, pod(gpu_type_id=UNKNOWN_STR)).calls == []


def _node(
    name: str, job: str | None = "llm", nodes: str = "2", global_networking: bool | str = True
) -> PolicyResource:
    env = {"NUM_NODES": nodes} | ({"TRAINING_JOB": job} if job else {})
    return stack_resource(POD, name, pod(env=env, global_networking=global_networking))


class TestNoGlobalNetworkingTraining:
    def test_two_nodes_over_global_networking_fail(self) -> None:
        reports = check_stack(NO_GLOBAL_NETWORKING_TRAINING, [_node("n0"), _node("n1")])
        assert len(reports.calls) == 1
        assert "pods n0, n1 form job 'llm'" in reports.text
        assert "100 Mbps" in reports.text and "InstantCluster" in reports.text

    def test_unnamed_job_groups_by_node_count(self) -> None:
        reports = check_stack(NO_GLOBAL_NETWORKING_TRAINING, [_node("a", job=None), _node("b", job=None)])
        assert "one 2-node job" in reports.text

    def test_separate_jobs_single_node_and_private_networking_pass(self) -> None:
        resources = [
            _node("a", job="x"),
            _node("b", job="y"),
            _node("c", nodes="1"),
            _node("d", nodes="1"),
            _node("e", job="z", global_networking=False),
            _node("f", job="z", global_networking=False),
        ]
        assert check_stack(NO_GLOBAL_NETWORKING_TRAINING, resources).calls == []

    def test_unknown_values_are_tolerated(self) -> None:
        resources = [_node("a", global_networking=UNKNOWN_STR), _node("b", nodes=UNKNOWN_STR), _node("c")]
        assert check_stack(NO_GLOBAL_NETWORKING_TRAINING, resources).calls == []


class TestMinCudaVersion:
    def test_declared_version_passes(self) -> None:
        assert check_resource(MIN_CUDA_VERSION, POD, pod()).calls == []

    def test_missing_version_fails(self) -> None:
        props = pod()
        del props["min_cuda_version"]
        reports = check_resource(MIN_CUDA_VERSION, POD, props, name="p")
        assert "pod 'p' declares no min_cuda_version" in reports.text

    def test_version_below_floor_fails(self) -> None:
        reports = check_resource(
            MIN_CUDA_VERSION, POD, pod(min_cuda_version="12.1"), {"lowest_min_cuda_version": "12.4"}
        )
        assert "declares min_cuda_version 12.1; it must be at least 12.4" in reports.text

    def test_unknown_version_is_tolerated(self) -> None:
        assert check_resource(MIN_CUDA_VERSION, POD, pod(min_cuda_version=UNKNOWN_STR)).calls == []
