"""`cluster.scheduler: slurm`: accepted on an Instant Cluster with RunPod's PyTorch image, refused otherwise
with the key path and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config
from stackconfig.slurm import is_runpod_pytorch_image
from tests.stackconfig.test_config import BASE


def _slurm(**cluster: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["trainstack:cluster"].update({"scheduler": "slurm", **cluster})
    return raw


def _problems(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    return {p.path: str(p) for p in exc.value.problems}


def test_default_scheduler_is_the_start_scripts() -> None:
    assert load_stack_config(BASE).cluster.scheduler == "scripts"


def test_slurm_on_a_cluster_with_runpods_pytorch_image_loads() -> None:
    config = load_stack_config(_slurm())
    assert config.cluster.scheduler == "slurm"
    assert config.cluster.topology == "cluster"


def test_slurm_with_another_image_names_the_image_key_and_the_fix() -> None:
    problems = _problems(_slurm(image="nvcr.io/nvidia/pytorch:24.05-py3"))
    assert set(problems) == {"trainstack:cluster.image"}
    message = problems["trainstack:cluster.image"]
    assert "official PyTorch images" in message
    assert "runpod/pytorch:" in message and "drop scheduler: slurm" in message


def test_slurm_on_a_pool_of_pods_names_the_scheduler_key_and_the_fix() -> None:
    raw = _slurm(topology="pods", nodes=2, volume_gb=0, data_centers=[])
    problems = _problems(raw)
    assert "trainstack:cluster.scheduler" in problems
    assert "set trainstack:cluster.topology to 'cluster'" in problems["trainstack:cluster.scheduler"]


def test_an_unknown_scheduler_is_refused_with_the_choices() -> None:
    problems = _problems(_slurm(scheduler="pbs"))
    assert "trainstack:cluster.scheduler" in problems
    assert "'scripts'" in problems["trainstack:cluster.scheduler"]
    assert "'slurm'" in problems["trainstack:cluster.scheduler"]


@pytest.mark.parametrize(
    ("image", "official"),
    [
        ("runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04", True),
        ("docker.io/runpod/pytorch:2.8.0-py3.11-cuda12.8.1-cudnn-devel-ubuntu22.04", True),
        ("runpod/pytorch@sha256:" + "a" * 64, True),
        ("runpod/pytorch-extra:1.0", False),
        ("ghcr.io/runpod/pytorch:1.0", False),
        ("myteam/runpod/pytorch:1.0", False),
        ("pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel", False),
    ],
)
def test_official_image_recognition(image: str, official: bool) -> None:
    assert is_runpod_pytorch_image(image) is official


def test_the_job_is_named_in_config_and_refused_with_the_rule() -> None:
    assert load_stack_config(_slurm()).cluster.slurm.job is None  # the stack's name
    assert load_stack_config(_slurm(slurm={"job": "pretrain-2"})).cluster.slurm.job == "pretrain-2"
    for bad in ("Pretrain", "run 2", "../x", "a" * 65, "-x"):
        problems = _problems(_slurm(slurm={"job": bad}))
        assert set(problems) == {"trainstack:cluster.slurm.job"}, (bad, problems)
        assert "lowercase letters, digits and '-'" in problems["trainstack:cluster.slurm.job"]
    unknown = _problems(_slurm(slurm={"name": "x"}))
    assert "trainstack:cluster.slurm.name" in unknown


def test_a_job_name_without_slurm_names_the_key_and_the_fix() -> None:
    raw = copy.deepcopy(BASE)
    raw["trainstack:cluster"]["slurm"] = {"job": "pretrain-2"}
    problems = _problems(raw)
    assert "trainstack:cluster.slurm.job" in problems
    assert "set trainstack:cluster.scheduler to 'slurm'" in problems["trainstack:cluster.slurm.job"]
