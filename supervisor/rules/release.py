"""Releasing a run whose work is over: a release cut short, a verified finish, every job ended.

releasing   the phase says released but compute is still there: finish that release
finished    every job's run state says finished and verifies against the bucket: release (a Slurm
            stack: only with no job of its queue running, pending or in a state not known)
job_ended   every job has ended (failed, or finished with others failed) and nothing recovers it:
            sync and release. A pool with a job still running is that job's; a cluster whose ended
            nodes all finished while another runs is finishing (its run state comes next); a Slurm
            cluster with any job running or pending is Slurm's (another job's end releases nothing)
"""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.faults import news
from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, live, one_round
from supervisor.rules.pool import ended_pods, jobs_left
from supervisor.rules.slurm import SLURM_BUSY, job_outcome


def releasing(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.phase not in ("active", "recovering") and obs.nodes > 0:  # recovering: supervisor/recover.py
        return Decision(
            "releasing",
            f"trainstack:run.phase is {obs.phase} but {obs.nodes} node(s) remain: finishing that release",
            ("release", "summary"),
            state="releasing",
        )
    return None


def finished(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    runs = obs.runs
    if obs.nodes == 0 or not runs or not all(r.status == "finished" and r.verified for r in runs):
        return None
    if obs.slurm_queue in SLURM_BUSY:  # the run is done, but Slurm still holds a job for the cluster
        return None
    steps = ", ".join(f"{r.run_id} at step {r.last_step}" for r in runs)
    return Decision(
        "finished",
        f"run finished and its final checkpoint verifies in the bucket ({steps}): releasing compute",
        ("release", "summary"),
        state="finished",
    )


def _finishing(obs: Observation) -> bool:
    """A cluster whose ended nodes all finished while others have not ended: the job is finishing, not over.
    Its rank 0 writes the run state only once every node has marked its final sync, after which each node
    writes its exit record; so for the seconds between a peer's end and rank 0's write, a round reads an
    ended node and no finished state (CI saw a round there release a finished run as `job_ended`). The
    next round reads it `finished`; a rank 0 that never writes it is no longer stepping: `idle`'s, with its
    deadline, or recovery's if its node is lost."""
    if obs.topology == "pods" or any(e.status != "finished" for e in obs.ended):
        return False
    return bool(obs.pods) and not {e.pod_id for e in obs.ended} >= set(obs.pods)


def job_ended(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    """Every job has ended and nothing before this rule answered it (no recovery, or it gave up its say):
    nothing useful is left to pay for."""
    if not live(obs) or obs.slurm_queue in SLURM_BUSY:  # a Slurm job runs or waits: the cluster is its
        return None
    if job_outcome(obs) in ("lost", "stopped"):  # Slurm requeues it, or a person stopped it (rules/slurm.py)
        return None
    attempts = obs.fleet.attempts if obs.fleet else ()
    failed_runs = [r for r in obs.runs if r.status == "failed" and news(r, attempts)]
    if obs.topology == "pods" and obs.pods:
        if jobs_left(obs, ended_pods(obs)):
            return None
    # A cluster is one job: a failed run state or an exit ends it, unless it is finishing (_finishing).
    elif not failed_runs and (not obs.ended or _finishing(obs)):
        return None
    why = (
        f"training exited with status {failed_runs[0].exit_status} ({failed_runs[0].run_id})"
        if failed_runs
        else "every job's start script has ended"
    )
    return Decision(
        "job_ended",
        f"{why}; no job is left running: syncing and releasing compute",
        ("sync", "release", "summary"),
        state="failed",
    )


RELEASING = Rule("releasing", releasing, ("releasing",), one_round)
FINISHED = Rule("finished", finished, ("finished",), one_round)
JOB_ENDED = Rule("job_ended", job_ended, ("failed",), one_round, history=("attempts",))

STATES = (
    State("finished", "release and a summary", one_round, "one round after the verified run state"),
    State("releasing", "finish the release", one_round, "one round"),
)
