"""The rules a `scheduler: slurm` stack must meet before anything is rented (RunPod's Slurm clusters)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

# A Slurm job's name becomes its `--job-name`, its checkpoint folder and bucket prefix and the first part of
# its run id (`<job>.<pod id>`): the stack name's alphabet (common/stackname.py), shorter.
_JOB_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
JOB_RULE = (
    "use lowercase letters, digits and '-', starting with a letter or digit, at most 64 characters "
    "(it names the Slurm job, its checkpoints in the bucket and its run id), e.g. pretrain-2"
)


def job_name_problem(name: str) -> str | None:
    """None for a name a Slurm job may have; else what is wrong with it and the rule (the name escaped)."""
    return None if _JOB_RE.fullmatch(name) else f"{name[:70]!a} is not a job name; {JOB_RULE}"


class SlurmConfig(BaseModel):
    """`trainstack:cluster.slurm`: what a `scheduler: slurm` stack asks of Slurm (docs/SLURM.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The training job's identity on the cluster: its Slurm job name, checkpoint prefix and run id. Default:
    # the stack's name. A new name is a new job on the same cluster: `up` delivers its files and the
    # controller `sbatch`es it; the cluster stays, and the earlier job's records stay where they are.
    job: str | None = None

    @field_validator("job")
    @classmethod
    def _job(cls, v: str | None) -> str | None:
        problem = None if v is None else job_name_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


# RunPod preinstalls and configures Slurm and munge only on its official PyTorch images; on any other image
# the Slurm processes do not start (docs.runpod.io/instant-clusters/slurm-clusters).
SLURM_IMAGE_REPOSITORY = "runpod/pytorch"
SLURM_IMAGE_EXAMPLE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


def is_runpod_pytorch_image(image: str) -> bool:
    """True for `runpod/pytorch:<tag>` or `runpod/pytorch@sha256:...` (Docker Hub, host or not)."""
    name = image.removeprefix("docker.io/").removeprefix("registry-1.docker.io/")
    repository = name.split("@", 1)[0].rsplit(":", 1)[0] if "@" in name or ":" in name else name
    return repository == SLURM_IMAGE_REPOSITORY
