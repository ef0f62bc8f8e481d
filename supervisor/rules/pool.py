"""A pool's trials (`topology: pods`, each pod its own job): which have ended, and ending one alone.

    trial_ended   a trial finished (its run state verifies) or failed, and no recovery took it up, while
                  other trials still run: its pod alone is released (trainstack:run.ended_trials). When
                  every trial has ended, `finished` or `job_ended` release the pool; a finished trial whose
                  checkpoint does not verify keeps its pod (`unverified`).

boot.py's failed_to_start and never_started and recovery's gave_up end one trial the same way
(`end_trials`); each message goes once per trial, keyed by that trial's run (`trial_key`).
"""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.model import Decision, Kind, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, live, once, one_round


def jobs_left(obs: Observation, ended: set[str]) -> list[str]:
    """A pool's pods whose job has not ended (a cluster is one job: all its pods or none)."""
    if obs.topology != "pods":
        return [] if ended else list(obs.pods)
    return [p for p in obs.pods if p not in ended]


def ended_pods(obs: Observation) -> set[str]:
    """The pods whose job has ended: an exit record, or (a pool) its run state says finished or failed."""
    ended = {e.pod_id for e in obs.ended}
    if obs.topology == "pods":
        by_run = dict(zip(obs.job_ids, obs.pods, strict=False))
        ended |= {
            by_run[r.run_id] for r in obs.runs if r.status in ("finished", "failed") and r.run_id in by_run
        }
    return ended


def trial_ranks(obs: Observation, pods: Sequence[str]) -> tuple[int, ...]:
    """The pool indices (trainstack:run.ended_trials' unit) of these pods."""
    rank = dict(zip(obs.pods, obs.ranks or range(len(obs.pods)), strict=False))
    return tuple(sorted(rank[p] for p in set(pods) if p in rank))


def trial_key(obs: Observation, pods: Sequence[str]) -> str:
    """What a trial's message is about: its run (the pod's job id where the round read it, else the pod),
    so it goes once per trial whatever other trials or clusters come and go."""
    run_of = dict(zip(obs.pods, obs.job_ids, strict=False)) if len(obs.job_ids) == len(obs.pods) else {}
    return ".".join(sorted({run_of.get(p) or p for p in pods}))


def end_trials(
    obs: Observation, kind: Kind, pods: Sequence[str], why: str, history: Sequence[RoundRecord]
) -> Decision:
    """A pool's trials that ended while others still run: their pods alone are released (stopped or
    deleted through Pulumi: trainstack:run.ended_trials); the other trials' pods and files stay as they
    are. The message goes once per trial; the update is repeated until the pods are gone (idempotent)."""
    ending = set(pods)
    left = [p for p in obs.pods if p not in ending]
    trials = trial_ranks(obs, pods)
    text = (
        f"{why}\nreleasing the pod(s) of trial(s) {', '.join(map(str, trials))} alone; "
        f"the pod(s) {', '.join(left)} stay"
    )
    head = f"{why.splitlines()[0]}: releasing its pod alone ({len(left)} other pod(s) stay)"
    decision = Decision(kind, head, ("notify", "end_trials"), text, state="trial_ended", trials=trials)
    return once(obs, f"{kind}:{trial_key(obs, pods)}", decision, history)


def trial_ended(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.topology != "pods" or not live(obs):
        return None
    ended = ended_pods(obs)
    by_run = dict(zip(obs.job_ids, obs.pods, strict=False))
    kept = {by_run.get(r.run_id) for r in obs.runs if r.status == "finished" and not r.verified}
    done = [p for p in obs.pods if p in ended and p not in kept]
    if not done or len(done) == len(obs.pods):  # every trial ended: `finished` or `job_ended` release all
        return None
    states = {by_run.get(r.run_id): r for r in obs.runs}
    exits = {e.pod_id: e for e in obs.ended}

    def what(pod: str) -> str:
        run, ex = states.get(pod), exits.get(pod)
        if run is not None and run.status == "finished":
            return f"trial on {pod} finished at step {run.last_step}, its checkpoint verifies"
        if run is not None and run.status == "failed":
            return f"trial on {pod} failed (exit {run.exit_status})"
        return f"trial on {pod}: start script {ex.status} in {ex.phase}: {ex.reason}" if ex else pod

    return end_trials(obs, "trial_ended", done, "; ".join(what(p) for p in done), history)


TRIAL_ENDED = Rule("trial_ended", trial_ended, ("trial_ended",), one_round, history=("notices",))

STATES = (
    State(
        "trial_ended",
        "a pool's trial ended while others run: one message, its pod alone released (run.ended_trials)",
        one_round,
        "one round after the trial's own state (finished, failed, never started, given up)",
    ),
)
