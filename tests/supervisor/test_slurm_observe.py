"""observe() on a `scheduler: slurm` stack: the controller's `scontrol show job -o` becomes exit facts of the
nodes whose start script left none; a stack without Slurm never asks for it."""

from __future__ import annotations

from typing import Any

from stackconfig.config import StackConfig
from stackconfig.files import load
from stackview.sources import SACCT_READ, SLURM_READ
from supervisor.observe import Sources, observe

OUTPUTS: dict[str, Any] = {
    "nodes": [
        {"rank": 0, "ip": "10.65.1.2", "pod_id": "podA", "ssh_endpoint": "10.65.1.2:22"},
        {"rank": 1, "ip": "10.65.1.3", "pod_id": "podB", "ssh_endpoint": "10.65.1.3:22"},
    ],
    "cost_per_hour": 63.84,
}
NODE_FAIL = (
    "JobId=4 JobName=local-cpu JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0 NodeList=podA,podB\n"
    "JobId=3 JobName=local-cpu JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=podA,podB\n"
)


def _config(scheduler: str) -> StackConfig:
    config = load("local-cpu")
    return config.model_copy(update={"cluster": config.cluster.model_copy(update={"scheduler": scheduler})})


def _sources(asked: list[str], answer: str = NODE_FAIL + SLURM_READ) -> Sources:
    def slurm(stack: str, _outputs: Any) -> str:
        asked.append(stack)
        return answer

    return Sources(
        aggregator=lambda _s, _o: {"time": 1.0, "nodes": []},
        billing=lambda _o, **_kw: 1.0,
        pod_statuses=lambda _ids: {},
        exits=lambda _s, _o, _p: {},
        ssh_key=lambda: True,
        slurm=slurm,
    )


def test_an_ended_job_is_an_exit_fact_of_each_node_without_its_own_record() -> None:
    asked: list[str] = []
    timeout = NODE_FAIL.replace("NODE_FAIL Reason=NodeDown", "TIMEOUT Reason=TimeLimit")
    obs = observe(
        "local-cpu", _config("slurm"), OUTPUTS, 1_800_000_000.0, _sources(asked, timeout + SLURM_READ)
    )
    assert asked == ["local-cpu"]
    assert [(e.rank, e.pod_id, e.status, e.reason) for e in obs.exits] == [
        (0, "podA", "failed", "Slurm job 4 TIMEOUT (TimeLimit)"),
        (1, "podB", "failed", "Slurm job 4 TIMEOUT (TimeLimit)"),
    ]
    assert (obs.slurm_job, obs.slurm_state) == ("4", "TIMEOUT")


def test_a_node_fail_job_is_no_nodes_end_but_the_jobs_own_state() -> None:
    """Slurm requeues a NODE_FAIL job: its nodes have not ended (issue #63); the round keeps Slurm's word."""
    obs = observe("local-cpu", _config("slurm"), OUTPUTS, 1_800_000_000.0, _sources([]))
    assert obs.exits == () and (obs.slurm_job, obs.slurm_state) == ("4", "NODE_FAIL")


def test_a_stack_without_slurm_never_asks_the_controller() -> None:
    asked: list[str] = []
    obs = observe("local-cpu", _config("scripts"), OUTPUTS, 1_800_000_000.0, _sources(asked))
    assert asked == [] and obs.exits == ()


def test_the_queue_is_read_only_when_scontrol_answered() -> None:
    """ "No jobs in the system" with the mark is an empty queue; no mark (slurmctld down, the ssh cut) is no
    reading at all, never an empty queue."""
    config = _config("slurm")
    read = {
        answer: observe("local-cpu", config, OUTPUTS, 1_800_000_000.0, _sources([], answer)).slurm_queue
        for answer in (
            f"No jobs in the system\n{SLURM_READ}\n",
            f"{NODE_FAIL}{SLURM_READ}\n",
            "JobId=5 JobName=x JobState=PENDING Reason=Resources\n" + SLURM_READ,
            "",
            NODE_FAIL,
        )
    }
    assert list(read.values()) == ["empty", "empty", "queued", None, None]
    assert observe("local-cpu", _config("scripts"), OUTPUTS, 1.0, _sources([])).slurm_queue is None


def test_sacct_is_read_first_where_the_cluster_runs_slurmdbd() -> None:
    """sacct's record of the configured job ends the run; a controller without slurmdbd is read with scontrol
    (and says so in the round's problems)."""
    config = _config("slurm")
    sacct = f"4|local-cpu|NODE_FAIL|0:0|podA,podB\n{SACCT_READ}\n"
    running = "JobId=4 JobName=local-cpu JobState=RUNNING Reason=None NodeList=podA,podB\n"
    obs = observe("local-cpu", config, OUTPUTS, 1.0, _sources([], sacct + running + SLURM_READ))
    assert obs.slurm_state == "NODE_FAIL" and obs.exits == () and obs.slurm_queue == "empty"
    assert not any(p.startswith("slurm:") for p in obs.problems)
    fallback = observe("local-cpu", config, OUTPUTS, 1.0, _sources([], running + SLURM_READ))
    assert fallback.exits == () and fallback.slurm_queue == "running" and fallback.slurm_state == "RUNNING"
    assert "slurm: sacct did not answer (no slurmdbd?): jobs read with scontrol" in fallback.problems
