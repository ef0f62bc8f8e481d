"""Which existing RunPod resource a create may adopt instead of renting a second one.

RunPod has no idempotency keys (the REST v2 OpenAPI spec has none). When `pulumi up` is killed after RunPod
accepted a
create but before Pulumi recorded the id, the resource lives on under the unique name trainstack gave it,
and `scripts/recover` drops the pending create from state. The next create must find that resource by
name and adopt it, or the team pays twice. A same-name resource is adopted only when it is live and has
the spec being asked for: anything else (a different GPU, another data center) is a different resource
and is left alone.
"""

from __future__ import annotations

from facts.pods import OWNER_ENV, is_terminal
from providers.runpod.records import (
    ApiCluster,
    ApiPod,
    ApiVolume,
    ClusterCreate,
    PodCreate,
    VolumeCreate,
)

# Statuses a pod does not come back from by itself.


def pod_matches(pod: ApiPod, body: PodCreate) -> bool:
    if is_terminal(pod.status) or pod.gpu is None:
        return False
    if pod.cluster is not None and pod.cluster.id:
        return False  # a cluster member is never a loose pod
    same_gpu = pod.gpu.id == body.gpu.id and pod.gpu.count == body.gpu.count
    same_cloud = pod.cloud is None or pod.cloud == body.cloud
    in_place = not body.data_center_ids or pod.data_center_id in body.data_center_ids
    # A pod named like ours without our ownership mark (a stranger's, another stack's) is never taken: the
    # stack would later destroy it (issue #62). The owner id is not compared: an `up` after a crash plans
    # the create anew, with an id of its own.
    same_mark = (pod.env or {}).get(OWNER_ENV) == (body.env or {}).get(OWNER_ENV)
    return same_gpu and same_cloud and in_place and same_mark


def cluster_matches(cluster: ApiCluster, body: ClusterCreate) -> bool:
    compute = cluster.compute
    if compute is None:
        return False
    same_shape = (compute.gpu_type_id, compute.gpu_count_per_pod, compute.pod_count) == (
        body.compute.gpu_type_id,
        body.compute.gpu_count_per_pod,
        body.compute.pod_count,
    )
    in_place = not body.data_center_ids or cluster.data_center_id in body.data_center_ids
    return same_shape and in_place and cluster.type in (None, body.type)


def volume_matches(volume: ApiVolume, body: VolumeCreate) -> bool:
    # Size only grows in place, so a smaller or equal request on an existing volume is still that volume.
    same_type = volume.type is None or body.type is None or volume.type == body.type
    return volume.data_center == body.data_center and same_type and volume.size >= body.size
