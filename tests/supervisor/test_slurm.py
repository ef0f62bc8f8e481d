"""Slurm's job states as the supervisor's evidence (supervisor/slurm.py): the table, the parser, the facts."""

from __future__ import annotations

import pytest

from supervisor.model import ExitFacts
from supervisor.slurm import (
    OUTCOMES,
    SlurmJob,
    exit_facts,
    latest,
    outcome,
    parse_scontrol,
    queue_idle,
    queue_reading,
)

# Every state of Slurm 22.05's job_state_codes (src/common/slurm_protocol_defs.c) and its flag states that
# scontrol prints as the state, with the outcome the supervisor must read.
TABLE = [
    ("PENDING", "queued"),
    ("CONFIGURING", "queued"),
    ("REQUEUED", "queued"),
    ("REQUEUE_FED", "queued"),
    ("REQUEUE_HOLD", "queued"),
    ("RESV_DEL_HOLD", "queued"),
    ("SUSPENDED", "queued"),
    ("STOPPED", "queued"),
    ("RESIZING", "queued"),
    ("SIGNALING", "queued"),
    ("SPECIAL_EXIT", "queued"),
    ("RUNNING", "running"),
    ("COMPLETING", "running"),
    ("STAGE_OUT", "running"),
    ("COMPLETED", "finished"),
    ("FAILED", "failed"),
    ("TIMEOUT", "failed"),
    ("OUT_OF_MEMORY", "failed"),
    ("DEADLINE", "failed"),
    ("BOOT_FAIL", "failed"),
    ("NODE_FAIL", "lost"),
    ("PREEMPTED", "lost"),
    ("REVOKED", "lost"),
    ("CANCELLED", "stopped"),
]


@pytest.mark.parametrize(("state", "expected"), TABLE)
def test_every_slurm_state_has_its_outcome(state: str, expected: str) -> None:
    assert outcome(state) == expected


def test_the_table_is_exactly_the_states_above() -> None:
    assert dict(TABLE) == OUTCOMES


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("CANCELLED by 0", "stopped"),
        ("completed", "finished"),
        ("RUNNING+", "running"),
        ("LAUNCHED", "unknown"),
    ],
)
def test_sacct_spellings_and_unknown_states(state: str, expected: str) -> None:
    assert outcome(state) == expected


SCONTROL = (
    "JobId=3 JobName=local-cpu UserId=root(0) JobState=NODE_FAIL Reason=NodeDown Dependency=(null) "
    "ExitCode=0:0 NodeList=podA,podB BatchHost=podA NumNodes=2\n"
    "JobId=2 JobName=local-cpu UserId=root(0) JobState=COMPLETED Reason=None ExitCode=0:0 "
    "NodeList=podA,podB NumNodes=2\n"
    "JobId=4 JobName=other JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)\n"
)


def test_scontrol_one_line_per_job_is_parsed() -> None:
    jobs = parse_scontrol(SCONTROL)
    assert [(j.job_id, j.name, j.state) for j in jobs] == [
        ("3", "local-cpu", "NODE_FAIL"),
        ("2", "local-cpu", "COMPLETED"),
        ("4", "other", "PENDING"),
    ]
    assert jobs[0].nodes == ("podA", "podB") and jobs[2].nodes == ()
    assert latest(jobs, "local-cpu") == jobs[0]
    assert latest(jobs, "absent") is None
    assert parse_scontrol("No jobs in the system\n") == ()


def test_an_empty_queue_is_idle_and_a_pending_job_is_not() -> None:
    jobs = parse_scontrol(SCONTROL)
    assert queue_idle(())
    assert queue_idle(jobs[:2])  # ended jobs only
    assert not queue_idle(jobs)  # job 4 waits for resources
    assert not queue_idle([SlurmJob("9", "x", "WEIRD")])  # an unknown state is not an empty queue


def test_an_ended_job_speaks_for_nodes_without_their_own_exit_record() -> None:
    lost = parse_scontrol(SCONTROL)[0]
    own = ExitFacts(rank=0, pod_id="podA", status="failed", phase="training", exit_status=143)
    facts = exit_facts(lost, ["podA", "podB"], [own])
    assert [(f.rank, f.pod_id, f.status, f.phase) for f in facts] == [(1, "podB", "failed", "training")]
    assert facts[0].reason == "Slurm job 3 NODE_FAIL (NodeDown)"
    done = SlurmJob("2", "local-cpu", "COMPLETED", nodes=("podA", "podB"))
    assert [f.status for f in exit_facts(done, ["podA", "podB"], [])] == ["finished", "finished"]
    cancelled = SlurmJob("5", "local-cpu", "CANCELLED", exit_code="0:15")
    assert {f.status for f in exit_facts(cancelled, ["podA"], [])} == {"stopped"}
    failed = SlurmJob("6", "local-cpu", "FAILED", exit_code="2:0")
    assert exit_facts(failed, ["podA"], [])[0].exit_status == 2


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "REQUEUED", "COMPLETING", "SOMETHING_NEW"])
def test_a_job_that_has_not_ended_says_nothing_about_nodes(state: str) -> None:
    assert exit_facts(SlurmJob("7", "local-cpu", state), ["podA", "podB"], []) == ()


@pytest.mark.parametrize(
    ("states", "reading"),
    [
        ((), "empty"),
        (("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), "empty"),  # Slurm keeps ended jobs (MinJobAge)
        (("COMPLETED", "PENDING"), "queued"),
        (("PENDING", "RUNNING"), "running"),
        (("RUNNING", "SOMETHING_NEW"), "unknown"),  # an unknown state outranks everything: never idle
        (("COMPLETED", "SOMETHING_NEW"), "unknown"),
        (("REQUEUED",), "queued"),  # a requeued job after NODE_FAIL waits again
    ],
)
def test_the_queue_in_one_word(states: tuple[str, ...], reading: str) -> None:
    jobs = [SlurmJob(str(i), "local-cpu", s) for i, s in enumerate(states, 1)]
    assert queue_reading(jobs) == reading
    assert queue_idle(jobs) == (reading == "empty")
