"""A round's fault, found (supervisor/recover.py turns it into a plan). Pure, in this order (the first found
is the one acted on): preempted, node_lost (RunPod's word only), node_unhealthy (XID/ECC, a failed health
gate, a straggler), job_failed (a failed run state no recovery answered, retried by its cause), stalled (no
new step for the stall threshold with every node answering; a pool: each trial on its own). The order and
what each means: supervisor/recover.py's docstring and docs/RECOVERY.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from supervisor.faults import ABSENT, HALTED, HARDWARE_ALERTS, STRAGGLER_ALERT, Attempt, NodeFacts, news
from supervisor.model import Observation, RoundRecord, newest_first
from supervisor.policy import Policy
from supervisor.rules.base import earlier
from supervisor.rules.pool import ended_pods
from supervisor.rules.slurm import restart_blocked
from train.monitor.straggler import Sample, stragglers

FaultKind = Literal["job_failed", "preempted", "node_lost", "node_unhealthy", "stalled"]
NODE_FAULTS = frozenset({"preempted", "node_lost", "node_unhealthy"})
RECOVERY_KINDS = frozenset({"job_failed", "preempted", "node_lost", "node_unhealthy", "stalled"})

# How a failed job's cause decides a retry (the run state's `failure`, classified on the node from the
# training log by train/node/diagnostics.py). Every retry counts against max_recoveries (an NCCL
# timeout retried "always" restarted a run six times in ten hours, on to the cap).
RETRY: dict[str | None, Literal["never", "bounded"]] = {
    "nccl_timeout": "bounded",  # a collective timed out: a transient fabric or peer problem, retried
    "oom": "never",  # the same job on the same GPUs runs out of memory again
    "config": "never",  # the job's own arguments or files are wrong; a restart changes nothing
    None: "bounded",
}
WHY_NEVER = {
    "oom": "training ran out of GPU memory; the forecast (scripts/forecast) should have caught this: "
    "lower micro_batch_per_gpu, shard more or checkpoint activations, then scripts/up",
    "config": "training stopped on a configuration error; a restart would fail the same way: fix the "
    "training command or its files, then scripts/up",
}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    reason: str
    nodes: tuple[NodeFacts, ...] = ()  # the faulty nodes (empty: the job as a whole)
    retry: Literal["never", "bounded"] = "bounded"
    cause: str | None = None  # a failed job's classified cause (RETRY's keys)
    # A second signal agrees (the round before, or another source): a replace may act on it.
    confirmed: bool = True


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def _nodes(obs: Observation) -> tuple[NodeFacts, ...]:
    return obs.fleet.nodes if obs.fleet is not None else ()


def _since(obs: Observation) -> float:
    """The newest recovery's start (the supervisor's clock): a stall is counted from it."""
    return max((a.at for a in obs.fleet.attempts), default=0.0) if obs.fleet else 0.0


def _job_failed(obs: Observation) -> Fault | None:
    attempts = obs.fleet.attempts if obs.fleet else ()
    for run in obs.runs:
        if run.status == "failed" and news(run, attempts):
            failure = run.failure
            retry = RETRY.get(failure, "bounded")
            cause = f" ({failure})" if failure else ""
            reason = f"training exited with status {run.exit_status}{cause} ({run.run_id})"
            # A pool's trial is its own pod's job: only that pod restarts; a cluster's job is all.
            pod = (
                dict(zip(obs.job_ids, obs.pods, strict=False)).get(run.run_id)
                if obs.topology == "pods"
                else None
            )
            mine = tuple(n for n in _nodes(obs) if n.pod_id == pod)
            return Fault("job_failed", reason, mine, retry, failure)
    return None


def _halted_before(obs: Observation, history: Sequence[RoundRecord]) -> set[str]:
    """The pods RunPod's listing called halted in the round just before this one."""
    before = earlier(obs, history)
    if not before or before[0].fleet is None:
        return set()
    return {n.pod_id for n in before[0].fleet.nodes if n.status in HALTED}


def _confirmed(obs: Observation, history: Sequence[RoundRecord], nodes: Sequence[NodeFacts]) -> bool:
    """Two signals before a replace (issue #63; SkyPilot #10123: one listing that omitted the pods recreated
    a healthy cluster). A pod RunPod lists as EXITED or ERROR is its own positive word; a pod the listing
    only left out (ABSENT) is replaced when the listing said so in the round before too, or the nodes agree
    (the aggregator could not reach it)."""
    again = _halted_before(obs, history)
    return all(n.status != ABSENT or n.pod_id in again or n.reachable is False for n in nodes)


def _node_fault(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Fault | None:
    nodes = _nodes(obs)
    spot_gone = [n for n in nodes if n.status in HALTED and n.spot]
    if spot_gone:
        names = ", ".join(f"node {n.rank} ({n.pod_id})" for n in spot_gone)
        return Fault(
            "preempted",
            f"RunPod took back spot capacity: {names} {spot_gone[0].status}",
            tuple(spot_gone),
            confirmed=_confirmed(obs, history, spot_gone),
        )
    # Lost is RunPod's word only: a node SSH cannot reach while RunPod says RUNNING (no key, a
    # network problem between the supervisor and the node) is `unreachable` (rules/alerts.py), never replaced.
    halted = [n for n in nodes if n.status in HALTED]
    if halted:
        parts = [
            f"node {n.rank} ({n.pod_id}) is "
            + ("gone from RunPod's listing" if n.status == ABSENT else str(n.status))
            for n in halted
        ]
        return Fault("node_lost", "; ".join(parts), tuple(halted), confirmed=_confirmed(obs, history, halted))
    gate = [e for e in obs.ended if e.status == "failed" and e.phase == "health_gate"]
    if gate:
        by_pod = {n.pod_id: n for n in nodes}
        sick_nodes = tuple(by_pod[e.pod_id] for e in gate if e.pod_id in by_pod)
        if sick_nodes:
            parts = [f"node {e.rank} ({e.pod_id}) failed its health gate: {e.reason}" for e in gate]
            return Fault("node_unhealthy", "; ".join(parts), sick_nodes)
    sick = [n for n in nodes if HARDWARE_ALERTS & set(n.alerts)]
    if sick:
        parts = [
            f"node {n.rank} ({n.pod_id}): {', '.join(sorted(HARDWARE_ALERTS & set(n.alerts)))}" for n in sick
        ]
        return Fault("node_unhealthy", "; ".join(parts), tuple(sick))
    slow = _stragglers(obs, history, policy)
    if slow:
        return Fault(
            "node_unhealthy", "straggler: " + "; ".join(line for _, line in slow), tuple(n for n, _ in slow)
        )
    return None


def _stragglers(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy
) -> list[tuple[NodeFacts, str]]:
    rc = policy.recovery
    window = obs.at - rc.straggler_for_min * 60 - 2 * policy.interval_min * 60
    stepping = _stepping(obs, history, window)
    samples = [Sample(o.at, {n.rank: n.step_time_s for n in _nodes(o) if n.step_time_s}) for o in stepping]
    # A step time is measured when a step ends: a job with no new step since the round before serves the last
    # one it had, however old. Frozen figures are no evidence about the nodes now, and a job that stopped
    # stepping is the stall check's to call (with its diagnostics), not a straggler to replace.
    found = (
        stragglers(samples, rc.straggler_tolerance_pct, rc.straggler_for_min * 60)
        if stepping and stepping[0] is obs
        else []
    )
    by_rank = {n.rank: n for n in _nodes(obs)}
    out = [
        (by_rank[s.rank], f"{s.line()} for {rc.straggler_for_min:g}+ min") for s in found if s.rank in by_rank
    ]
    # The aggregator's own straggler alert, where it raises one, counts the same.
    out += [
        (n, f"node {n.rank}: {STRAGGLER_ALERT} alert")
        for n in _nodes(obs)
        if STRAGGLER_ALERT in n.alerts and n.rank not in {s.rank for s in found}
    ]
    return out


def _stepping(obs: Observation, history: Sequence[RoundRecord], since: float) -> list[Observation]:
    """This round's observation and the earlier ones from `since`, newest first, whose job had made a new step
    since the round before it: the rounds whose step times are fresh. Only the window and the one round
    before it are sorted, not the whole history."""
    earlier = [r.observation for r in history if r.observation.at < obs.at]
    older = [o for o in earlier if o.at < since]
    last_older = [max(older, key=lambda o: o.at)] if older else []
    ordered = sorted([*last_older, *(o for o in earlier if o.at >= since), obs], key=lambda o: o.at)
    fresh = [
        later
        for before, later in pairwise(ordered)
        if later.step is not None and before.step is not None and later.step > before.step
    ]
    return fresh[::-1]


# A silence the run's own pace explains is not a hang: no new step for up to this many times the slowest step
# the job measured, or the longest quiet spell it had and came out of on its own (a checkpoint save).
PACE_FACTOR = 2.0


def _quiet_spells(
    history: Sequence[RoundRecord], attempts: Sequence[Attempt], interval_s: float, boot_s: float
) -> list[float]:
    """How long each stretch of two or more rounds at one step lasted before the step moved on by itself (at
    the round's granularity: the first to the last round at that step, plus one interval). A stretch that
    began within `boot_s` after a recovery is the resume's boot, not the job's own pace, and is left out."""
    spells = []
    ordered = sorted(history, key=lambda r: r.observation.at)
    i = 0
    while i < len(ordered):
        first = ordered[i].observation
        j = i
        while j + 1 < len(ordered) and ordered[j + 1].observation.step == first.step:
            j += 1
        nxt = ordered[j + 1].observation if j + 1 < len(ordered) else None
        booting = any(first.at - boot_s <= a.at <= (nxt.at if nxt else first.at) for a in attempts)
        moved_on = (
            nxt is not None and nxt.step is not None and first.step is not None and nxt.step > first.step
        )
        if j > i and moved_on and not booting:
            spells.append(ordered[j].observation.at - first.at + interval_s)
        i = j + 1
    return spells


def stall_threshold_s(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> float:
    """How long with no new step is a hang. `hang_after_min` (10 by default: PyTorch's default timeout
    of an NCCL process group, `init_process_group(timeout=)`, after which its watchdog aborts a collective
    that has not completed, so a healthy NCCL job never waits longer in one), and never less than
    PACE_FACTOR times what this run showed to be normal: its slowest measured step (the progress contract's
    `step_time_s`, the aggregator's per node) and the longest quiet spell it came out of by itself, such as a
    checkpoint save. A slow step or a live save is then never called a hang; a stopped rank's silence grows
    past both while its peers' measured step time stays what it was."""
    base = policy.recovery.hang_after_min * 60
    step_times = [n.step_time_s for n in _nodes(obs) if n.step_time_s]
    slowest = max(step_times, default=0.0)
    attempts = obs.fleet.attempts if obs.fleet else ()
    spells = _quiet_spells(history, attempts, policy.interval_min * 60, base)
    return max(base, PACE_FACTOR * slowest, PACE_FACTOR * max(spells, default=0.0))


def _pool_stalled(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Fault | None:
    """A pool's trials stall one by one: a pod whose own job has not ended and whose own step has
    not moved for the stall threshold; only those pods are restarted (or given up)."""
    if obs.node0_reachable is not True or len(obs.node_steps) != len(obs.pods):
        return None
    ended = ended_pods(obs)
    threshold = stall_threshold_s(obs, history, policy)
    stuck: list[tuple[NodeFacts, float]] = []
    by_pod = {n.pod_id: n for n in _nodes(obs)}
    for i, pod in enumerate(obs.pods):
        step = obs.node_steps[i]
        if step is None or pod in ended or pod not in by_pod:
            continue
        start = obs.at
        for past in earlier(obs, history):  # this pod's own step (a trial that ended leaves the list)
            steps = dict(zip(past.pods, past.node_steps, strict=False))
            if len(past.node_steps) != len(past.pods) or steps.get(pod) != step:
                break
            start = past.at
        start = max(start, _since(obs))
        if obs.at - start >= threshold:
            stuck.append((by_pod[pod], obs.at - start))
    if not stuck:
        return None
    step_of = dict(zip(obs.pods, obs.node_steps, strict=False))
    who = ", ".join(f"node {n.rank} ({n.pod_id}) at step {step_of[n.pod_id]:g}" for n, _ in stuck)
    lasted = min(t for _, t in stuck)
    return Fault(
        "stalled", f"no new step for {_minutes(lasted)} on its trial: {who}", tuple(n for n, _ in stuck)
    )


def _stalled(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Fault | None:
    if obs.topology == "pods" and obs.pods:
        return _pool_stalled(obs, history, policy)
    nodes = _nodes(obs)
    # A peer the aggregator cannot reach does not stop the stall from being one (with unreachable
    # no longer lost, a dead member RunPod calls RUNNING would otherwise hold the run until idle).
    if obs.step is None or obs.node0_reachable is not True:
        return None
    start = obs.at
    for record in newest_first(history):
        past = record.observation
        if past.at >= obs.at:
            continue
        if past.step != obs.step or past.nodes == 0:
            break
        start = past.at
    start = max(start, _since(obs))  # a restart's own boot and resume is not a stall
    lasted = obs.at - start
    if lasted < stall_threshold_s(obs, history, policy):
        return None
    steps = [n.step for n in nodes if n.step is not None]
    behind = [n for n in nodes if n.step is not None and n.step == min(steps)] if steps else []
    who = (
        ", ".join(f"node {n.rank} ({n.pod_id}) at step {n.step:g}" for n in behind)
        if steps and min(steps) < max(steps)
        else f"every node at step {obs.step:g}"
    )
    return Fault(
        "stalled", f"no new step for {_minutes(lasted)} with every node answering: {who}", tuple(behind)
    )


def find_fault(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Fault | None:
    """This round's fault, the first of the order in the module docstring. A Slurm job that is not running
    by Slurm's own word (waiting, requeued, cancelled, ended for good) is neither failed nor stalled:
    only RunPod's node faults are acted on (supervisor/rules/slurm.py)."""
    node = _node_fault(obs, history, policy)
    if node is not None or restart_blocked(obs) is not None:
        return node
    return _job_failed(obs) or _stalled(obs, history, policy)
