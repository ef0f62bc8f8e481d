"""A `scheduler: slurm` stack's rendering (components/slurm.py): the submitter, the sbatch script, the task,
delivered to every node beside the usual start scripts; nothing of it for a stack without Slurm."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from components import slurm
from components.delivery import node_files
from components.render import Artifacts, render_artifacts
from stackconfig.config import StackConfig
from stackconfig.slurm import SlurmConfig
from tests.components.conftest import fake_nodes, stack_config

STACK = "local-cpu"


def _config(**cluster: object) -> StackConfig:
    config = stack_config(STACK)
    return config.model_copy(
        update={"cluster": config.cluster.model_copy(update={"scheduler": "slurm", **cluster})}
    )


def _render(config: StackConfig) -> Artifacts:
    return render_artifacts(STACK, config, fake_nodes(config))


def test_a_stack_without_slurm_renders_and_delivers_none_of_it() -> None:
    config = stack_config(STACK)
    arts = _render(config)
    assert not set(slurm.FILES) & set(arts.start_scripts)
    assert slurm.start_script(config, 1) == "start-node-1.sh"
    assert not set(slurm.FILES) & set(node_files(arts, 1, {}))


def test_every_node_gets_the_slurm_files_and_delivery_starts_the_submitter() -> None:
    config = _config()
    arts = _render(config)
    for rank in range(config.cluster.nodes):
        files = node_files(arts, rank, {})
        assert set(slurm.FILES) <= set(files) and f"start-node-{rank}.sh" in files
        assert slurm.start_script(config, rank) == slurm.SUBMIT


def test_the_sbatch_script_asks_for_every_node_one_task_each_and_runs_the_task_with_srun() -> None:
    config = _config()
    text = _render(config).start_scripts[slurm.SBATCH]
    workdir = config.training.workdir
    for line in (
        f"#SBATCH --job-name={STACK}",
        f"#SBATCH --nodes={config.cluster.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --requeue",
        f"#SBATCH --chdir={workdir}",
        f"srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash {workdir}/{slurm.TASK}",
    ):
        assert line in text.splitlines(), line
    # --time: max_run_hours (1 h in local-cpu) and the start script's 300 s stop grace, and a minute.
    assert f"#SBATCH --time={60 + 5 + 1}" in text.splitlines()


def test_the_task_runs_its_own_ranks_start_script_with_its_own_identity_and_log() -> None:
    text = _render(_config()).start_scripts[slurm.TASK]
    assert "done <hostfile" in text
    assert "export NODE_RANK=$rank NODE_ADDR=$address RUNPOD_POD_ID=$pod" in text
    assert 'exec >>"logs/start-node-$rank.$RUNPOD_POD_ID.log" 2>&1' in text
    assert 'exec bash "start-node-$rank.sh"' in text


def test_the_task_finds_its_rank_from_the_hostfile(tmp_path: Path) -> None:
    """The task's rank lookup, run for real: a fake `hostname` gives this node's addresses."""
    config = _config()
    arts = _render(config)
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "hostfile").write_text(arts.hostfile)
    (work / "start-node-1.sh").write_text('echo "rank=$NODE_RANK addr=$NODE_ADDR pod=$RUNPOD_POD_ID"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ip1 = arts.hostfile.splitlines()[1].split()[0]
    fake = f'#!/bin/sh\nif [ "$1" = -I ]; then echo "172.17.0.5 {ip1}"; else echo pod001; fi\n'
    (bin_dir / "hostname").write_text(fake)
    (bin_dir / "hostname").chmod(0o755)
    task = arts.start_scripts[slurm.TASK].replace(f"cd {config.training.workdir}", f"cd {work}")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_ID": "0",
        "SLURMD_NODENAME": "n",
    }
    env |= {"NODE_RANK": "0", "NODE_ADDR": "10.65.0.10", "RUNPOD_POD_ID": "pod000"}  # the submitter's
    ran = subprocess.run(
        ["bash", "-c", task], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert ran.returncode == 0, ran.stderr
    log = (work / "logs" / "start-node-1.pod001.log").read_text()
    assert f"rank=1 addr={ip1} pod=pod001" in log


@pytest.mark.parametrize("name", slurm.FILES)
def test_slurm_scripts_pass_bash_n_and_shellcheck(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(_render(_config()).start_scripts[name])
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed: apt-get install -y shellcheck (scripts/bootstrap does)")
    result = subprocess.run(["shellcheck", "--shell=bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_job_named_in_config_is_the_slurm_job_its_checkpoints_and_its_run() -> None:
    """trainstack:cluster.slurm.job names the job everywhere it has an identity; the default is the stack."""
    assert slurm.slurm_job_name(STACK, _config()) == STACK
    config = _config(slurm=SlurmConfig(job="second"))
    assert slurm.slurm_job_name(STACK, config) == "second"
    scripts = _render(config).start_scripts
    assert "#SBATCH --job-name=second" in scripts[slurm.SBATCH].splitlines()
    assert 'squeue -h -t "$states" -n second' in scripts[slurm.SUBMIT]
    start = scripts["start-node-0.sh"]
    bucket = config.bucket
    assert bucket is not None
    for line in (
        "TRAINSTACK_JOB=${TRAINSTACK_JOB:-second}",
        f"TRAINSTACK_CHECKPOINT_PREFIX=${{TRAINSTACK_CHECKPOINT_PREFIX:-{bucket.prefix}/second}}",
        "TRAINSTACK_RUN_ID=${TRAINSTACK_RUN_ID:-second.pod000}",
    ):
        assert line in start.splitlines(), line
    # the stack's own job (no name) keeps the names it always had
    assert "TRAINSTACK_RUN_ID=${TRAINSTACK_RUN_ID:-local-cpu.pod000}" in (
        _render(_config()).start_scripts["start-node-0.sh"].splitlines()
    )
