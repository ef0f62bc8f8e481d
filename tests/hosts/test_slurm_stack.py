"""A `scheduler: slurm` stack end to end on emulated hosts: `up` makes a 2-node SLURM cluster whose hosts run
Slurm itself, `sinfo` on the controller shows both nodes, delivery submits the training job with `sbatch`,
Slurm runs it on both nodes through `srun` (the usual start script on each: preflight, resume, training,
checkpoint sync), its state in Slurm ends COMPLETED, its checkpoints are in the bucket, and one supervisor
round releases the cluster. (`sacct` needs slurmdbd, which the local RunPod does not run: Slurm's state is
read with `scontrol show job`, which keeps finished jobs for MinJobAge.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emulator.slurm import slurm_unavailable
from harness.webhook import Receiver
from tests.hosts.conftest import HOSTS_NET, HostsEnv
from tests.hosts.test_local_cluster import BUCKET, STACK, Cluster, every_log_says
from tests.hosts.test_supervise_hosts import supervise
from tests.polling import poll

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.root,
    pytest.mark.allow_hosts(["127.0.0.1", "::1", "localhost", HOSTS_NET]),
]


@pytest.fixture(scope="module")
def node_env_overrides() -> dict[str, str]:
    # Short training: this test proves the path through Slurm, not the training.
    return {"TRAINSTACK_STEPS": "60", "TRAINSTACK_STEP_SLEEP_S": "0.05"}


def _job_state(cluster: Cluster, controller: dict[str, str]) -> dict[str, str] | None:
    """`scontrol show job` of the stack's job on the controller, as key -> value; None before it exists."""
    out = cluster.ssh(controller, f"scontrol show job -o $(squeue -h -t all -n {STACK} -o %i | head -n 1)")
    fields = dict(re.findall(r"(\w+)=(\S*)", out.stdout)) if out.returncode == 0 else {}
    return fields or None


def test_a_slurm_stack_runs_its_job_through_sbatch_and_is_released(
    hosts_env: HostsEnv, tmp_path: Path, receiver: Receiver
) -> None:
    if why := slurm_unavailable():
        pytest.skip(why)
    cluster = Cluster(hosts_env, tmp_path, 2)
    try:
        cluster.config("trainstack:cluster.scheduler", "slurm", path=True)
        cluster.up()
        nodes = cluster.outputs()["nodes"]
        controller = nodes[0]
        # Slurm on the controller knows both members by their pod ids.
        listed = cluster.ssh(controller, "sinfo -h -N -o '%N'").stdout.split()
        assert sorted(listed) == sorted(n["pod_id"] for n in nodes), listed
        job = poll(
            lambda: _job_state(cluster, controller), "the job submitted by sbatch", 60, 1.0, cluster.logs
        )
        assert job["JobName"] == STACK and job["NumNodes"] == "2", job
        done = poll(
            lambda: (
                (s := _job_state(cluster, controller))
                and s["JobState"] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
                and s
            ),
            "the Slurm job to end",
            240,
            1.0,
            cluster.logs,
        )
        assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", (done, cluster.logs())
        # Each node ran the usual start script under Slurm, in its usual log.
        every_log_says(cluster, nodes, "start script ends with status 0", "each node's start script", 30)
        assert "Slurm job" in cluster.log(1, nodes[1]["pod_id"])
        assert max(cluster.bucket_steps()) == 60, cluster.bucket_steps()
        print(f"slurm job: {done['JobId']} {done['JobState']} on {done['NodeList']}, bucket {BUCKET}")
        # The supervisor reads the finished run (its state verified against the bucket) and releases.
        round_ = supervise(cluster, tmp_path, receiver, "--once", "--json")
        assert round_.returncode == 0, round_.stderr[-4000:]
        decided = json.loads(round_.stdout)
        assert decided["decision"] == "finished" and "release" in decided["actions"], decided
        live = hosts_env.runpod.admin.live()
        assert live["clusters"] == [] and live["pods"] == [], live
    finally:
        if cluster.s3.list_buckets()["Buckets"]:
            cluster.empty_bucket()
        cluster.cli.run("destroy", "--yes", "--stack", STACK, check=False)
