"""How long a pod takes to boot: the fixed phase timings, or a model driven by image size and image cache.

`fixed` (the default) keeps `Timing.provisioning_s` for every boot, as the emulator always did.
`image` models what dstack's RunPod backend reports (third party): a 16 GB image starts in ~165 s cold and
~33 s when
the host already holds it. Between those two points time grows linearly with the image size, so a first
pull costs `CACHED_READY_S + PULL_S_PER_GB * GB`. The model is ours [INF], fitted to those two figures:

- the first pull of an image in a data center is cold; a pod created after that pull finished is cached
  (RunPod reuses warm hosts; one cache per data center is the simplest stand-in for that);
- Instant Cluster members land on fresh fabric hosts: always cold, plus `CLUSTER_SETUP_S` for the fabric
  and rendezvous, so an 8-node cluster of a 16 GB image needs ~4 minutes;
- only the first boot of a pod pulls; a restart or a container reset uses the fixed timings.

The extra time is spent in PROVISIONING; STARTING and the runtime lag keep their `Timing` values, so the
pod is ready (RUNNING with runtime and ports) exactly `ready_s` after it was created.
"""

from __future__ import annotations

from typing import Literal

from emulator.config import Timing
from emulator.models import PodRecord

LatencyModel = Literal["fixed", "image"]

COLD_READY_S = 165.0  # 16 GB image, nothing cached (dstack's RunPod backend, third party)
CACHED_READY_S = 33.0  # same image already on the host (dstack's RunPod backend, third party)
REFERENCE_IMAGE_GB = 16.0
PULL_S_PER_GB = (COLD_READY_S - CACHED_READY_S) / REFERENCE_IMAGE_GB  # 8.25 s per GB pulled
CLUSTER_SETUP_S = 60.0  # fabric (ens1-ens8) and rendezvous on top of the image pull [INF]

# Known image repositories and their compressed size in GB; others get the server's `--image-gb`.
IMAGE_GB = {
    "runpod/pytorch": 16.0,  # CUDA devel images (stackconfig/config.py: "CUDA images are ~16 GB")
    "runpod/base": 8.0,
}


def image_gb(image: str, default_gb: float) -> float:
    repository = image.split("@", 1)[0].rsplit(":", 1)[0] if "/" in image else image.split(":", 1)[0]
    return IMAGE_GB.get(repository, default_gb)


def ready_s(size_gb: float, *, cold: bool, cluster: bool = False) -> float:
    """Seconds from create to ready (RUNNING, runtime reported, SSH mapped) for one first boot."""
    pull = PULL_S_PER_GB * size_gb if cold or cluster else 0.0
    return CACHED_READY_S + pull + (CLUSTER_SETUP_S if cluster else 0.0)


class BootLatency:
    """Answers `provisioning_s(pod)`; remembers each pod's first-boot figure so it never changes."""

    def __init__(self, model: LatencyModel, timing: Timing, default_image_gb: float) -> None:
        self.model = model
        self.timing = timing
        self.default_image_gb = default_image_gb
        self._first_boot: dict[str, float] = {}  # pod id -> PROVISIONING seconds of its first boot
        self._pulled: dict[tuple[str, str], float] = {}  # (image, data center) -> when a pull finished

    def provisioning_s(self, pod: PodRecord) -> float:
        if self.model == "fixed" or pod.boot_at != pod.created_at:
            return self.timing.provisioning_s
        known = self._first_boot.get(pod.id)
        if known is None:
            known = self._decide(pod)
            self._first_boot[pod.id] = known
        return known

    def _decide(self, pod: PodRecord) -> float:
        key = (pod.image, pod.data_center_id)
        finished = self._pulled.get(key)
        cold = finished is None or finished > pod.created_at
        total = ready_s(
            image_gb(pod.image, self.default_image_gb), cold=cold, cluster=pod.cluster_id is not None
        )
        provisioning = max(0.0, total - self.timing.starting_s - self.timing.runtime_lag_s)
        pulled_at = pod.created_at + provisioning
        if finished is None or pulled_at < finished:
            self._pulled[key] = pulled_at
        return provisioning
