"""A `scheduler: slurm` stack end to end on emulated hosts (2 nodes, the CPU job), in one boot of its cluster
(issue #47: a second boot for the lost node showed nothing the first could not; ~40 s of the serial lane).
`up` makes a SLURM cluster whose hosts run Slurm itself; `sinfo` on the controller shows both nodes; delivery
submits the training job with `sbatch`; Slurm runs it on both nodes through `srun` (the usual start script on
each: preflight, resume, training, checkpoint sync); its state in Slurm ends COMPLETED and its checkpoints are
in the bucket. A second job: a new `trainstack:cluster.slurm.job` and `pulumi up` submit it on the same
cluster (its id unchanged), it runs to COMPLETED and the first job's record stays readable. A third job loses
a node mid-run: Slurm ends it NODE_FAIL, the supervisor replaces the cluster, the new cluster's job resumes
from the bucket and completes, and one supervisor round releases the cluster. `sacct` answers where MariaDB
and slurmdbd are installed (scripts/bootstrap; the controller's host runs them); Slurm's state is read with
`scontrol show job` too, which keeps finished jobs for MinJobAge, and from the controller's job completion
log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emulator.slurm import accounting_unavailable, slurm_unavailable
from harness.webhook import Receiver
from tests.hosts.conftest import HOSTS_NET, HostsEnv
from tests.hosts.test_local_cluster import (
    BUCKET,
    PREFIX,
    STACK,
    STEPS,
    Cluster,
    every_log_says,
    first_step,
)
from tests.hosts.test_supervise_hosts import supervise
from tests.polling import poll

pytestmark = [
    # serial: a Slurm cluster of emulated hosts that trains, one at a time with the serial lane's other
    # clusters; there it also balances the two lanes, which run side by side (harness/lanes.py).
    pytest.mark.serial,
    pytest.mark.e2e,
    pytest.mark.root,
    pytest.mark.allow_hosts(["127.0.0.1", "::1", "localhost", HOSTS_NET]),
]


ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED")


@pytest.fixture(scope="module")
def node_env_overrides() -> dict[str, str]:
    """The bucket sync timer at 10 s, not the conftest's 5 s (each sync is a Python process importing boto3):
    the lost node still finds checkpoints in the bucket mid-run (the ~20 s of training syncs once or twice),
    and every start script syncs at its end. It pays for this file's second job (issue #48)."""
    return {"TRAINSTACK_CHECKPOINT_INTERVAL_S": "10"}


def _ended(cluster: Cluster, controller: dict[str, str], name: str = STACK) -> dict[str, str] | None:
    state = _job_state(cluster, controller, name)
    return state if state is not None and state["JobState"] not in ACTIVE else None


def _job_state(cluster: Cluster, controller: dict[str, str], name: str = STACK) -> dict[str, str] | None:
    """`scontrol show job` of the job of this name on the controller, as key -> value; None before it
    exists."""
    out = cluster.ssh(controller, f"scontrol show job -o $(squeue -h -t all -n {name} -o %i | head -n 1)")
    fields = dict(re.findall(r"(\w+)=(\S*)", out.stdout)) if out.returncode == 0 else {}
    return fields or None


def test_a_slurm_stack_runs_jobs_through_sbatch_recovers_a_lost_node_and_is_released(
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
        # NumNodes reads "2-2" (min-max) while the job is pending, "2" once it holds its allocation
        assert job["JobName"] == STACK and job["NumNodes"] in ("2", "2-2"), job
        done = poll(lambda: _ended(cluster, controller), "the Slurm job to end", 240, 1.0, cluster.logs)
        assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", (done, cluster.logs())
        if (why := accounting_unavailable()) is None:  # slurmdbd has the job's record: sacct shows it
            sacct = f"sacct -X -n -P -j {done['JobId']} -o JobName,State,ExitCode"
            accounted = poll(
                lambda: "COMPLETED" in (out := cluster.ssh(controller, sacct).stdout) and out,
                "sacct showing the job COMPLETED",
                60,
                1.0,
            )
            assert accounted.split() == [f"{STACK}|COMPLETED|0:0"], accounted
        else:
            print(f"no sacct: {why}")
        # Each node ran the usual start script under Slurm, in its usual log.
        every_log_says(cluster, nodes, "start script ends with status 0", "each node's start script", 30)
        assert "Slurm job" in cluster.log(1, nodes[1]["pod_id"])
        assert max(cluster.bucket_steps()) == STEPS, cluster.bucket_steps()
        print(f"slurm job: {done['JobId']} {done['JobState']} on {done['NodeList']}, bucket {BUCKET}")
        _a_second_job_is_a_config_change(cluster, controller, done)
        _a_node_lost_mid_job_is_node_fail_then_recovered(cluster, hosts_env, tmp_path, receiver)
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


SECOND = "second"
THIRD = "third"


def _job_steps(cluster: Cluster, job: str) -> list[int]:
    """The checkpoint steps of the job of this name in the bucket (its prefix: trainstack/JOB/)."""
    listed = cluster.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"trainstack/{job}/").get("Contents", [])
    return sorted(int(m.group(1)) for o in listed if (m := re.search(r"/step-(\d+)\.pt$", o["Key"])))


def _a_second_job_is_a_config_change(
    cluster: Cluster, controller: dict[str, str], first: dict[str, str]
) -> None:
    """A new job name in config and `pulumi up`: the same cluster, a new Slurm job that runs to COMPLETED
    under its own name, checkpoints and run; the first job's record stays. The second job starts from the
    first one's last checkpoint in the bucket before its end (copied under its own prefix, as a team would
    start a fine-tune), so it trains a few steps only."""
    before = cluster.outputs()
    listed = cluster.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("Contents", [])
    saved = {int(m.group(1)): o["Key"] for o in listed if (m := re.search(r"step-(\d+)\.pt$", o["Key"]))}
    start = max(s for s in saved if s < STEPS)
    body = cluster.s3.get_object(Bucket=BUCKET, Key=saved[start])["Body"].read()
    target = f"trainstack/{SECOND}/{saved[start][len(PREFIX) :]}"
    cluster.s3.put_object(Bucket=BUCKET, Key=target, Body=body)
    cluster.config("trainstack:cluster.slurm.job", SECOND, path=True)
    cluster.up()
    after = cluster.outputs()
    assert after["cluster_id"] == before["cluster_id"], (before, after)
    assert after["nodes"] == before["nodes"], (before, after)
    second = poll(
        lambda: _ended(cluster, controller, SECOND), "the second job to end", 180, 1.0, cluster.logs
    )
    assert second["JobState"] == "COMPLETED" and second["JobId"] != first["JobId"], (second, cluster.logs())
    kept = _job_state(cluster, controller, STACK)  # the first job's record, read as before
    assert kept is not None and (kept["JobId"], kept["JobState"]) == (first["JobId"], "COMPLETED"), kept
    steps = _job_steps(cluster, SECOND)
    assert steps[-1] == STEPS and steps[0] == start, steps  # resumed from the copy, trained to the end
    assert max(cluster.bucket_steps()) == STEPS  # the first job's checkpoints, where they were
    print(f"second job: {second['JobId']} {second['JobState']} from step {start}, same cluster")


def _jobcomp(env: HostsEnv, controller: str) -> str:
    """The controller's job completion log (jobcomp/filetxt): every ended job instance, a requeued one too."""
    path = env.runpod.state_dir / "hosts" / controller / "slurm" / "jobcomp.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _a_node_lost_mid_job_is_node_fail_then_recovered(
    cluster: Cluster, hosts_env: HostsEnv, tmp_path: Path, receiver: Receiver
) -> None:
    """A third job, from step 0, loses its last node once it has a checkpoint in the bucket: Slurm ends the
    job NODE_FAIL; the supervisor sees the lost node and replaces the cluster through Pulumi (RunPod adds no
    node to a cluster); the new cluster's Slurm runs the job again through sbatch, and it resumes from the
    bucket and completes."""
    cluster.config("trainstack:cluster.slurm.job", THIRD, path=True)
    cluster.up()
    first = cluster.outputs()["nodes"]
    controller, last = first[0], first[-1]
    poll(
        lambda: [s for s in _job_steps(cluster, THIRD) if s > 0],
        "a checkpoint of the third job in the bucket",
        120,
        1.0,
        cluster.logs,
    )
    assert max(_job_steps(cluster, THIRD)) < STEPS, "training finished before a node could be lost"
    hosts_env.runpod.admin.out_of_band(last["pod_id"])
    # Slurm's own word: the node stopped answering, so the job's instance ended NODE_FAIL.
    comp = poll(
        lambda: (
            f"Name={THIRD} JobState=NODE_FAIL" in (text := _jobcomp(hosts_env, controller["pod_id"])) and text
        ),
        "Slurm ending the job NODE_FAIL",
        90,
        1.0,
    )
    assert f"Name={STACK} JobState=COMPLETED" in comp, comp  # the first job's instance, ended as it did
    # The supervisor sees the lost node and replaces the cluster through Pulumi (RunPod adds no node).
    rounds = []
    for _ in range(3):
        round_ = supervise(cluster, tmp_path, receiver, "--once", "--json")
        assert round_.returncode == 0, round_.stderr[-4000:]
        rounds.append(json.loads(round_.stdout))
        now = cluster.outputs()["nodes"]
        if len(now) == 2 and last["pod_id"] not in {n["pod_id"] for n in now}:
            break
    assert rounds[0]["decision"] == "node_lost", rounds
    repaired = cluster.outputs()["nodes"]
    assert len(repaired) == 2 and last["pod_id"] not in {n["pod_id"] for n in repaired}, rounds
    # The new cluster's Slurm runs the job again through sbatch; it resumes from the bucket and completes.
    done = poll(
        lambda: _ended(cluster, repaired[0], THIRD), "the new cluster's job to end", 240, 1.0, cluster.logs
    )
    assert done["JobState"] == "COMPLETED", (done, cluster.logs())
    log0 = cluster.log(0, repaired[0]["pod_id"])
    resumed = first_step(log0)
    assert resumed is not None and resumed > 0, log0
    poll(lambda: STEPS in _job_steps(cluster, THIRD), "the third job's final checkpoint in the bucket", 30)
    print(f"NODE_FAIL, then {[r['decision'] for r in rounds]}; resumed at step {resumed}")
