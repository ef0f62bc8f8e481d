"""Sizes, counts and timings RunPod bounds, with the source of each."""

from __future__ import annotations

from typing import Final

# Network volumes: 10-4096 GB, size can only grow (OpenAPI v2 `NetworkVolumeCreateInput.size`).
VOLUME_MIN_GB: Final = 10
VOLUME_MAX_GB: Final = 4096
# Self-serve Instant Clusters: 2-8 nodes of 8 H100 SXM in one data center (`sources.INSTANT_CLUSTERS`);
# the v2 API itself bounds `podCount` to 2-250.
CLUSTER_MIN_NODES: Final = 2
CLUSTER_MAX_NODES_SELF_SERVE: Final = 8
# A spot pod gets SIGTERM, then SIGKILL 5 s later, and loses its container disk (`sources.SPOT`).
SPOT_NOTICE_S: Final = 5.0
# The v2 spec's example quota: 60 requests a minute, 3000 an hour, 50000 a day per user (its
# RateLimit-Policy header example); treated as real until headers say otherwise.
RATE_PER_MINUTE: Final = 60
RATE_PER_HOUR: Final = 3000
RATE_PER_DAY: Final = 50000
