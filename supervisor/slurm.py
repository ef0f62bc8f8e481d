"""Slurm's own job states as the supervisor's evidence, pure: on a `scheduler: slurm` stack they say whether
the job finished, failed or lost a node, beside the nodes' exit records and the supervisor's own rules.

Where the jobs come from: `sacct` when the cluster runs slurmdbd and it answers, else `scontrol show job`
(`read_jobs`). Slurm's states (slurm.schedmd.com/job_state_codes.html) map onto the outcomes the decision
already owns (docs/SUPERVISOR.md):

    queued    PENDING, CONFIGURING, REQUEUED, REQUEUE_FED, REQUEUE_HOLD, RESV_DEL_HOLD, SUSPENDED, STOPPED,
              RESIZING, SIGNALING, SPECIAL_EXIT   (still Slurm's: nothing to decide)
    running   RUNNING, COMPLETING, STAGE_OUT
    finished  COMPLETED                          -> `finished` (still verified against the bucket)
    failed    FAILED, TIMEOUT, OUT_OF_MEMORY, DEADLINE, BOOT_FAIL -> `job_ended` (or recovery's, by cause)
    lost      NODE_FAIL, PREEMPTED, REVOKED      -> recovery's: Slurm requeues the job (it waits again), a
                                                    node RunPod lost means a new cluster; no exit facts
    stopped   CANCELLED                          -> someone ran `scancel`: a stop, never resubmitted

TIMEOUT, OUT_OF_MEMORY and DEADLINE (`FINAL`) end the run with their reason: a retry would end the same way.

A state this table does not know is `unknown`: never read as running, and never as an end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from supervisor.model import ExitFacts

Outcome = Literal["queued", "running", "finished", "failed", "lost", "stopped", "unknown"]

OUTCOMES: dict[str, Outcome] = {
    "PENDING": "queued",
    "CONFIGURING": "queued",
    "REQUEUED": "queued",
    "REQUEUE_FED": "queued",
    "REQUEUE_HOLD": "queued",
    "RESV_DEL_HOLD": "queued",
    "SUSPENDED": "queued",
    "STOPPED": "queued",
    "RESIZING": "queued",
    "SIGNALING": "queued",
    "SPECIAL_EXIT": "queued",
    "RUNNING": "running",
    "COMPLETING": "running",
    "STAGE_OUT": "running",
    "COMPLETED": "finished",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "OUT_OF_MEMORY": "failed",
    "DEADLINE": "failed",
    "BOOT_FAIL": "failed",
    "NODE_FAIL": "lost",
    "PREEMPTED": "lost",
    "REVOKED": "lost",
    "CANCELLED": "stopped",
}
ENDED: frozenset[Outcome] = frozenset({"finished", "failed", "lost", "stopped"})
# Ends a retry would reach again: the run ends with Slurm's reason (supervisor/rules/slurm.py).
FINAL = {
    "TIMEOUT": "the job ran past its time limit (sbatch --time); a retry stops at the same limit",
    "OUT_OF_MEMORY": "a task ran out of the memory Slurm allows it; the same job runs out again",
    "DEADLINE": "the job reached its deadline (sbatch --deadline); a retry is past it already",
}


def state_word(state: str) -> str:
    """Slurm's state in one word: "CANCELLED by 0" -> CANCELLED, "RUNNING+" -> RUNNING."""
    return state.strip().split(" ", 1)[0].rstrip("+").upper()


# What an ended job's nodes are, in the exit records' words (train/node/exitrecord.py).
_EXIT_STATUS: dict[Outcome, str] = {
    "finished": "finished",
    "failed": "failed",
    "lost": "failed",
    "stopped": "stopped",
}


def outcome(state: str) -> Outcome:
    """Slurm's state (`JobState`, or sacct's `State` such as "CANCELLED by 0") -> the supervisor's outcome."""
    return OUTCOMES.get(state_word(state), "unknown")


@dataclass(frozen=True)
class SlurmJob:
    """One job as `scontrol show job -o` prints it."""

    job_id: str
    name: str
    state: str
    exit_code: str = "0:0"
    nodes: tuple[str, ...] = ()  # node names (pod ids on RunPod's and the local RunPod's clusters)
    reason: str = ""

    @property
    def outcome(self) -> Outcome:
        return outcome(self.state)


_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_scontrol(text: str) -> tuple[SlurmJob, ...]:
    """`scontrol show job -o` (one job a line) -> jobs; "No jobs in the system" -> none."""
    jobs = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" not in fields or "JobState" not in fields:
            continue
        jobs.append(
            SlurmJob(
                job_id=fields["JobId"],
                name=fields.get("JobName", ""),
                state=fields["JobState"],
                exit_code=fields.get("ExitCode", "0:0"),
                nodes=tuple(_expand(fields.get("NodeList", ""))),
                reason=fields.get("Reason", "None"),
            )
        )
    return tuple(jobs)


# `sacct -X -n -P -o` these fields: one line a job allocation, `|` between fields (parse_sacct).
SACCT_FIELDS = ("JobIDRaw", "JobName", "State", "ExitCode", "NodeList")


def parse_sacct(text: str) -> tuple[SlurmJob, ...]:
    """`sacct -X -n -P -o JobIDRaw,JobName,State,ExitCode,NodeList` -> jobs (a state such as "CANCELLED by
    0" is read by `outcome`); lines of any other shape are skipped."""
    jobs = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS) or not parts[0].isdigit() or not parts[2]:
            continue
        job_id, name, state, exit_code, nodelist = parts
        jobs.append(SlurmJob(job_id, name, state, exit_code or "0:0", tuple(_expand(nodelist))))
    return tuple(jobs)


Source = Literal["sacct", "scontrol"]


def read_jobs(sacct: str | None, scontrol: str | None) -> tuple[tuple[SlurmJob, ...], Source] | None:
    """The jobs a round decides from and where they come from; None when neither answered (no word on the
    queue). `sacct` when it answered (None: it did not, e.g. no slurmdbd): slurmdbd keeps every job, past
    scontrol's MinJobAge too; a job only scontrol holds yet is added (slurmdbd hears of a job a moment after
    slurmctld does, and an empty sacct must not read as an empty queue then). Else `scontrol show job`'s."""
    if sacct is None:
        return None if scontrol is None else (parse_scontrol(scontrol), "scontrol")
    accounted = parse_sacct(sacct)
    known = {j.job_id for j in accounted}
    live = parse_scontrol(scontrol) if scontrol is not None else ()
    return accounted + tuple(j for j in live if j.job_id not in known), "sacct"


def _expand(nodelist: str) -> Iterable[str]:
    """A plain comma list (pod ids need no ranges); `(null)` is no node."""
    return [n for n in nodelist.split(",") if n and n != "(null)"]


def queue_idle(jobs: Sequence[SlurmJob]) -> bool:
    """An empty queue with no job pending or running: Slurm has nothing for the cluster to do."""
    return queue_reading(jobs) == "empty"


Queue = Literal["empty", "queued", "running", "unknown"]
QUEUE_READINGS: tuple[Queue, ...] = ("empty", "queued", "running", "unknown")


def queue_reading(jobs: Sequence[SlurmJob]) -> Queue:
    """The whole queue in one word, for the decision (supervisor/decide.py): `unknown` when any job is in a
    state this table does not know (never read as empty, so never idle), else `running` when a job runs,
    `queued` when one waits (Slurm's wait: not idle), `empty` when every job Slurm still holds has ended."""
    outcomes = {j.outcome for j in jobs}
    busiest: tuple[Queue, ...] = ("unknown", "running", "queued")
    return next((word for word in busiest if word in outcomes), "empty")


def latest(jobs: Sequence[SlurmJob], name: str) -> SlurmJob | None:
    """The newest job of this name (the highest id): a requeue keeps its id, a resubmission gets a new one."""
    mine = [j for j in jobs if j.name == name and j.job_id.isdigit()]
    return max(mine, key=lambda j: int(j.job_id)) if mine else None


def exit_facts(job: SlurmJob, pods: Sequence[str], recorded: Iterable[ExitFacts]) -> tuple[ExitFacts, ...]:
    """The ended job's word for each node (`pods` in rank order) whose start script left no exit record: a
    job Slurm ended before the script could write one (TIMEOUT's SIGKILL). The start scripts' own records win
    where they exist; nothing while the job has not ended, nor for a job Slurm lost (NODE_FAIL, PREEMPTED):
    Slurm requeues it, and a node's end is not the run's."""
    if job.outcome not in ENDED or job.outcome == "lost":
        return ()
    have = {f.pod_id for f in recorded}
    status = _EXIT_STATUS[job.outcome]
    code = job.exit_code.split(":", 1)[0]
    reason = f"Slurm job {job.job_id} {job.state}" + (
        f" ({job.reason})" if job.reason not in ("", "None") else ""
    )
    return tuple(
        ExitFacts(
            rank=rank,
            pod_id=pod,
            status=status,
            phase="training",
            exit_status=int(code) if code.isdigit() else 1,
            reason=reason,
            run_id=f"slurm-{job.job_id}",
        )
        for rank, pod in enumerate(pods)
        if pod not in have and (not job.nodes or pod in job.nodes)
    )


def slurm_exits(
    job_name: str, jobs: Sequence[SlurmJob], pods: Sequence[str], recorded: Sequence[ExitFacts]
) -> tuple[ExitFacts, ...]:
    """What observe adds for a `scheduler: slurm` stack: the newest job of the configured job's name
    (components/slurm.py `slurm_job_name`) among the controller's jobs (`read_jobs`), as exit facts of the
    nodes that left none (`exit_facts`). Jobs of other names (an earlier job of the stack, a job someone
    submitted by hand) are not this run's end."""
    job = latest(jobs, job_name)
    return exit_facts(job, pods, recorded) if job is not None else ()
