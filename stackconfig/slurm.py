"""The rules a `scheduler: slurm` stack must meet before anything is rented (RunPod's Slurm clusters)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackconfig.config import StackConfig

# RunPod preinstalls and configures Slurm and munge only on its official PyTorch images; on any other image
# the Slurm processes do not start (docs.runpod.io/instant-clusters/slurm-clusters).
SLURM_IMAGE_REPOSITORY = "runpod/pytorch"
SLURM_IMAGE_EXAMPLE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


def is_runpod_pytorch_image(image: str) -> bool:
    """True for `runpod/pytorch:<tag>` or `runpod/pytorch@sha256:...` (Docker Hub, host or not)."""
    name = image.removeprefix("docker.io/").removeprefix("registry-1.docker.io/")
    repository = name.split("@", 1)[0].rsplit(":", 1)[0] if "@" in name or ":" in name else name
    return repository == SLURM_IMAGE_REPOSITORY


def slurm_problems(config: StackConfig) -> list[tuple[str, str]]:
    """(key path, message with the fix) for each Slurm rule the config breaks; none for the start scripts."""
    c = config.cluster
    if c.scheduler != "slurm":
        return []
    out: list[tuple[str, str]] = []
    if c.topology != "cluster":
        out.append(
            (
                "cluster.scheduler",
                f"'slurm' needs an Instant Cluster (RunPod's `type: SLURM`), but topology is {c.topology!r}; "
                "set trainstack:cluster.topology to 'cluster', or drop scheduler to use the start scripts",
            )
        )
    if not is_runpod_pytorch_image(c.image):
        out.append(
            (
                "cluster.image",
                f"{c.image!r} is not one of RunPod's official PyTorch images, the only ones on which RunPod "
                f"starts Slurm and munge; use e.g. {SLURM_IMAGE_EXAMPLE!r}, or drop scheduler: slurm",
            )
        )
    return out
