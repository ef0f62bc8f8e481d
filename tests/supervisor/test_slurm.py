"""Slurm's job states as the supervisor's evidence (supervisor/slurm.py): the table, the parser, the facts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from supervisor.model import ExitFacts
from supervisor.slurm import (
    OUTCOMES,
    SlurmJob,
    exit_facts,
    latest,
    outcome,
    parse_sacct,
    parse_scontrol,
    queue_idle,
    queue_reading,
    read_jobs,
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
    assert exit_facts(lost, ["podA", "podB"], [own]) == ()  # NODE_FAIL: Slurm requeues it (issue #63)
    timed_out = replace(lost, state="TIMEOUT", reason="TimeLimit")
    facts = exit_facts(timed_out, ["podA", "podB"], [own])
    assert [(f.rank, f.pod_id, f.status, f.phase) for f in facts] == [(1, "podB", "failed", "training")]
    assert facts[0].reason == "Slurm job 3 TIMEOUT (TimeLimit)"
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


SACCT = "12|second|COMPLETED|0:0|podA,podB\n11|local-cpu|CANCELLED by 0|0:15|podA,podB\nnot|a|job\n"
LIVE = "JobId=13 JobName=third JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)\n"


@pytest.mark.parametrize(
    ("sacct", "scontrol", "source", "jobs"),
    [
        # sacct answered: its jobs, and a job only slurmctld holds yet (slurmdbd hears of it later)
        (SACCT, LIVE, "sacct", [("12", "COMPLETED"), ("11", "CANCELLED by 0"), ("13", "PENDING")]),
        # where both hold a job, sacct's record is read
        (
            SACCT,
            "JobId=12 JobName=second JobState=COMPLETING\n",
            "sacct",
            [("12", "COMPLETED"), ("11", "CANCELLED by 0")],
        ),
        (SACCT, None, "sacct", [("12", "COMPLETED"), ("11", "CANCELLED by 0")]),
        ("", "No jobs in the system\n", "sacct", []),  # both answered, nothing: an empty queue
        # sacct did not answer (no slurmdbd): scontrol's
        (None, LIVE, "scontrol", [("13", "PENDING")]),
        (None, "No jobs in the system\n", "scontrol", []),
        (None, None, None, None),  # neither answered: no word on the queue
    ],
)
def test_sacct_is_preferred_when_it_answers_and_scontrol_is_the_fallback(
    sacct: str | None, scontrol: str | None, source: str | None, jobs: list[tuple[str, str]] | None
) -> None:
    read = read_jobs(sacct, scontrol)
    if source is None:
        assert read is None
        return
    assert read is not None
    assert read[1] == source and [(j.job_id, j.state) for j in read[0]] == jobs


def test_sacct_lines_are_parsed_into_jobs() -> None:
    jobs = parse_sacct(SACCT)
    assert [(j.job_id, j.name, j.outcome, j.exit_code, j.nodes) for j in jobs] == [
        ("12", "second", "finished", "0:0", ("podA", "podB")),
        ("11", "local-cpu", "stopped", "0:15", ("podA", "podB")),
    ]
    assert parse_sacct("") == () and parse_sacct("sacct: error: accounting storage is disabled") == ()
