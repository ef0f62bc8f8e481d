"""A `scheduler: slurm` stack, decided by Slurm's own states: its job's (the newest of the configured name,
`Observation.slurm_state`) and its queue's (supervisor/slurm.py `queue_reading`).

- `slurm_job`: the job's own state. NODE_FAIL, PREEMPTED, REVOKED are recovery's (a node RunPod lost is
  replaced by recovery first): Slurm requeues the job, and the rounds wait for it up to recovery's
  hang_after_min (a requeue takes seconds), then the queue decides. TIMEOUT, OUT_OF_MEMORY, DEADLINE end
  the run with Slurm's reason (a retry would end the same way): sync and release, unless another job of
  the queue runs or waits. A job waiting (PENDING, held, requeued) is Slurm's wait, never a stall nor idle;
  CANCELLED is a person's stop, never resubmitted: no recovery restarts it (`restart_blocked`) and no job's
  end releases around it; an empty queue then releases on idle's clock.
- `slurm_queue_empty`: the queue holds no job running or pending (every job it keeps has ended): idle's
  warning and grace, from the first empty reading.
- `queued` (decide's `none`): a job waits or is in a state trainstack does not know: Slurm's wait, never
  idle nor finished; the cap and never_started bound it.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import gmtime, strftime

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules import idle
from supervisor.rules.base import Rule, State, earlier, live, minutes, under
from supervisor.slurm import FINAL, outcome, state_word

# Queue readings that hold the cluster: a job runs, waits, or is in a state not known.
SLURM_BUSY = frozenset({"queued", "running", "unknown"})


def job_outcome(obs: Observation) -> str | None:
    """The stack's own Slurm job in the supervisor's words (supervisor/slurm.py OUTCOMES); None: not read."""
    return outcome(obs.slurm_state) if obs.slurm_state else None


def restart_blocked(obs: Observation) -> str | None:
    """Why recovery must not restart (re-deliver, so resubmit) this Slurm stack's job, or None: it is not
    running by Slurm's word (waiting, lost and being requeued, cancelled by a person, completed, or ended
    for good): no stall, no failed job to restart.
    Node faults RunPod reports are still recovery's (a lost node means a new cluster)."""
    word = job_outcome(obs)
    if word is None or word == "running":
        return None
    if word == "failed" and state_word(obs.slurm_state or "") not in FINAL:
        return None  # FAILED: the job's own failure, retried within max_recoveries like any other
    return f"Slurm job {obs.slurm_job} is {obs.slurm_state}"


def _lost_since(obs: Observation, history: Sequence[RoundRecord]) -> float:
    start = obs.at
    for past in earlier(obs, history):
        if past.slurm_job != obs.slurm_job or past.slurm_state is None or outcome(past.slurm_state) != "lost":
            break
        start = past.at
    return start


def slurm_job(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    word = job_outcome(obs)
    if word is None or not live(obs):
        return None
    job = f"Slurm job {obs.slurm_job} {obs.slurm_state}"
    if word == "lost":
        waited = obs.at - _lost_since(obs, history)
        bound = _requeue_wait_min(policy)
        if waited >= bound * 60:
            return None  # never requeued: the queue decides (empty: idle's warning and grace)
        return Decision(
            "recovering",
            f"{job}: Slurm requeues it; waiting for the requeue ({minutes(waited)} of {bound:g} min), "
            "nothing released",
            state="recovering",
        )
    final = FINAL.get(state_word(obs.slurm_state or ""))
    if final is None or obs.slurm_queue in SLURM_BUSY:
        return None  # another job of the queue runs or waits: the cluster is still Slurm's
    return Decision(
        "job_ended",
        f"{job}: {final}; not retried: syncing and releasing compute",
        ("sync", "release", "summary"),
        state="failed",
    )


def _requeue_wait_min(p: Policy) -> float:
    return p.recovery.hang_after_min


def _requeue_deadline_min(p: Policy) -> float:
    return p.recovery.hang_after_min + p.interval_min


def queue_empty_since(obs: Observation, history: Sequence[RoundRecord]) -> float | None:
    """When a Slurm stack's queue was first read empty in the rounds up to this one (None: not empty now).
    A round that did not read it (no SSH) ends the run of rounds: the count starts again."""
    if obs.nodes == 0 or obs.node0_reachable is not True or obs.slurm_queue != "empty":
        return None
    start = obs.at
    for past in earlier(obs, history):
        if past.nodes == 0 or past.slurm_queue != "empty":
            break
        start = past.at
    return start


def slurm_queue_empty(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    """Slurm has nothing for the cluster to do. Idle's thresholds, on the queue's own clock."""
    start = queue_empty_since(obs, history)
    util = idle.threshold(policy, "idle_util_pct")
    busy = obs.gpu_util_max is not None and not under(obs.gpu_util_max, util)
    if start is None or busy:  # GPUs busy outside Slurm are never called idle (the generic rule's word)
        return None
    since = strftime("%Y-%m-%d %H:%M UTC", gmtime(start))
    why = f"slurm queue empty: no job running or pending since {since}"
    return idle.idle_release(obs, history, policy, why, start, "with nothing for Slurm to run")


def _no_deadline(_p: Policy) -> float | None:
    return None


SLURM_JOB = Rule(
    "slurm_job",
    slurm_job,
    ("recovering", "failed"),
    _requeue_deadline_min,
    look_back_min=_requeue_deadline_min,
    history=("audit",),
)
SLURM_QUEUE_EMPTY = Rule(
    "slurm_queue_empty",
    slurm_queue_empty,
    ("idle",),
    idle.deadline_min,
    look_back_min=idle.deadline_min,
    history=("audit",),
)

STATES = (
    State(
        "queued",
        "a Slurm job waits in the queue, or is in a state not known: Slurm's, neither idle nor finished",
        _no_deadline,
        "the cap (run.max_cost_usd); never_started's boot_timeout_min while no step ever came",
    ),
)
