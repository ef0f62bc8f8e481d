"""Recovery decisions: a pure function of a round's observation, the rounds before, the policy.

`assess` finds this round's fault, in this order (the first found is the one acted on):

    preempted       a spot pod RunPod stopped (EXITED): rent it again at the bid
    node_lost       RunPod says a pod is EXITED / ERROR / gone (a node SSH or the aggregator cannot
                    reach while RunPod says RUNNING is not lost: decide.py's `unreachable`, never replaced)
    node_unhealthy  an XID or uncorrected-ECC alert, or a straggler `straggler_for_min` long (train/monitor/
                    straggler.py) judged on the rounds in which the job stepped (a stopped job's
                    agents go on serving their last step times): the hardware is replaced
    node_unhealthy  also: a node's start script failed its GPU health gate (its exit record): a new node helps
    job_failed      the job's run state says it exited non-zero and no recovery answered that state yet (by
                    identity, not time). An NCCL timeout retries within max_recoveries like any other cause
                    a config error or out of memory never does (the forecast and the preview
                    should have caught it: the message says so) and compute is released. After the node
                    faults: a job whose node died fails too, and a restart on the same nodes would not help
    stalled         every node answers but no new step for `hang_after_min` (or longer where the run's
                    own pace says so: `stall_threshold_s`): diagnostics, then the job is restarted on the
                    same nodes

and turns it into a `Plan`: what to replace (an Instant Cluster cannot lose or gain one member, so any node
fault of a cluster replaces the whole cluster; a loose pod replaces only that pod) or restart, bounded by
`max_recoveries` per run with a backoff that doubles after each, and the data centers to try last (one that
failed twice in the run). Past the bound: `gave_up`, which releases compute and says why. A recovery begun
by a round that was killed is finished by the next one before anything new is decided (level-triggered:
decide again from what is seen, and the Pulumi update is the same one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from stackconfig.supervisor import data_center_order
from supervisor.faults import HALTED, HARDWARE_ALERTS, STRAGGLER_ALERT, Attempt, Fleet, NodeFacts
from supervisor.model import Decision, Observation, Plan, RoundRecord, RunState, newest_first
from train.monitor.straggler import Sample, stragglers

if TYPE_CHECKING:
    from supervisor.decide import Policy

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


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def _nodes(obs: Observation) -> tuple[NodeFacts, ...]:
    return obs.fleet.nodes if obs.fleet is not None else ()


def _since(obs: Observation) -> float:
    """The newest recovery's start (the supervisor's clock): a stall is counted from it."""
    return max((a.at for a in obs.fleet.attempts), default=0.0) if obs.fleet else 0.0


def news(run: RunState, attempts: Sequence[Attempt]) -> bool:
    """A failed run state no recovery answered yet, by identity (the node's finish time was
    compared with the supervisor's clock, so a node clock behind it hid a failure, one ahead re-answered it).
    """
    return not any(run.key in a.answered for a in attempts)


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


def _node_fault(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Fault | None:
    nodes = _nodes(obs)
    spot_gone = [n for n in nodes if n.status in HALTED and n.spot]
    if spot_gone:
        names = ", ".join(f"node {n.rank} ({n.pod_id})" for n in spot_gone)
        return Fault(
            "preempted", f"RunPod took back spot capacity: {names} {spot_gone[0].status}", tuple(spot_gone)
        )
    # Lost is RunPod's word only: a node SSH cannot reach while RunPod says RUNNING (no key, a
    # network problem between the supervisor and the node) is `unreachable` (decide.py), never replaced.
    halted = [n for n in nodes if n.status in HALTED]
    if halted:
        parts = [f"node {n.rank} ({n.pod_id}) is {n.status}" for n in halted]
        return Fault("node_lost", "; ".join(parts), tuple(halted))
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
    from supervisor.decide import earlier, ended_pods

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
    """This round's fault, the first of the order in the module docstring."""
    return _node_fault(obs, history, policy) or _job_failed(obs) or _stalled(obs, history, policy)


def _failed_twice(fleet: Fleet, current: str | None) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for dc in [a.data_center for a in fleet.attempts if a.kind in NODE_FAULTS] + [current]:
        if dc:
            counts[dc] = counts.get(dc, 0) + 1
    return tuple(sorted(dc for dc, n in counts.items() if n >= 2))


def _counted(fleet: Fleet) -> list[Attempt]:
    """Attempts that count against max_recoveries: every one, whatever its cause."""
    return list(fleet.attempts)


def assess(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Plan | None:
    """The recovery plan of this round, or None when recovery has nothing to say."""
    rc, fleet = policy.recovery, obs.fleet
    if (
        not rc.enabled
        or fleet is None
        or obs.nodes == 0
        or obs.phase not in ("active", "recovering")
        or obs.blind
    ):
        return None
    if any(r.status == "finished" for r in obs.runs):
        return None  # finished and unverified have rules of their own (decide.py)
    pending = next((a for a in reversed(fleet.attempts) if a.outcome == "begun"), None)
    if pending is not None:
        return Plan(
            pending.kind,
            f"finishing the recovery begun at {pending.at:.0f} ({pending.what or pending.kind}), cut short",
            "finish",
            pending.targets,
            pending.data_center,
        )
    fault = find_fault(obs, history, policy)
    if fault is None:
        if obs.phase == "recovering":
            return Plan(
                "recovering", "the recovered nodes answer: trainstack:run.phase back to active", "finish"
            )
        return None
    placed = [n.data_center for n in fault.nodes if n.data_center]
    dc = placed[0] if placed else fleet.data_centers[0] if len(fleet.data_centers) == 1 else None
    if fault.retry == "never":
        why = WHY_NEVER.get(fault.cause or "", "not a transient fault")
        text = f"gave up, here is why: {fault.reason}; never retried: {why}"
        return Plan("gave_up", text, "release", tuple(n.pod_id for n in fault.nodes), message=text)
    counted = _counted(fleet)
    if len(counted) >= rc.max_recoveries:
        tried = ", ".join(f"{a.kind}" for a in counted) or "none allowed"
        text = (
            f"gave up, here is why: {fault.reason}, after {len(counted)} recoveries this run "
            f"(max_recoveries {rc.max_recoveries}: {tried})"
        )
        return Plan("gave_up", text, "release", tuple(n.pod_id for n in fault.nodes), message=text)
    if fleet.attempts:
        wait = rc.backoff_min * 60 * 2 ** (len(fleet.attempts) - 1)
        since = obs.at - fleet.attempts[-1].at
        if since < wait:
            return Plan(
                fault.kind,
                f"{fault.kind}: {fault.reason}; next recovery in {_minutes(wait - since)} (backoff after "
                f"{len(fleet.attempts)} this run)",
                "none",
            )
    plan = _plan(obs, fault, fleet, dc)
    # What this recovery answers: the failed run states and exit records of the jobs it restarts or replaces
    # (a pool's: the targeted trials' only; the others' stay news).
    pods = set(plan.targets) if obs.topology == "pods" and plan.targets else set(obs.pods)
    runs_of = dict(zip(obs.job_ids, obs.pods, strict=False)) if obs.topology == "pods" else {}
    answered = (
        *(r.key for r in obs.runs if r.status == "failed" and runs_of.get(r.run_id, "*") in pods | {"*"}),
        *(e.key for e in obs.ended if not pods or e.pod_id in pods),
    )
    return replace(plan, answered=answered, cause=fault.cause)


def _plan(obs: Observation, fault: Fault, fleet: Fleet, dc: str | None) -> Plan:
    n = len(fleet.attempts) + 1
    if fault.kind in NODE_FAULTS:
        avoided = _failed_twice(fleet, dc)
        whole = fleet.topology == "cluster"
        targets = () if whole else tuple(x.pod_id for x in fault.nodes)
        what = "recreating the Instant Cluster" if whole else f"recreating pod(s) {', '.join(targets)}"
        note = (
            f"; data center {', '.join(avoided)} failed twice this run: tried last, ask RunPod for credit"
            if avoided
            else ""
        )
        text = (
            f"{fault.kind}: {fault.reason}: {what}, resuming from the bucket's newest checkpoint "
            f"(recovery {n}){note}"
        )
        return Plan(
            fault.kind,
            text,
            "replace",
            targets,
            dc,
            data_center_order(fleet.data_centers, avoided),
            avoided,
            text,
        )
    if fault.kind == "stalled":
        text = (
            f"stalled: {fault.reason}: diagnostics to the bucket, then the job restarts on the same "
            f"nodes (recovery {n})"
        )
    else:
        text = f"{fault.kind}: {fault.reason}: restarting the job on the same nodes (recovery {n})"
    return Plan(fault.kind, text, "restart", tuple(x.pod_id for x in fault.nodes), dc, message=text)


_ACTIONS = {
    "restart": ("recover",),
    "replace": ("recover",),
    "finish": ("recover",),
    "release": ("sync", "release"),
    "none": (),
}


def recovery(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    """decide's rule: the plan as a Decision (act.py's Recoverer carries the `recover` action out)."""
    plan = assess(obs, history, policy)
    if plan is None:
        return None
    if plan.act == "release" and obs.topology == "pods" and plan.targets:
        # A pool's trial given up while other trials run: they own the stack; say it once.
        from supervisor.decide import end_trials, ended_pods, jobs_left

        if jobs_left(obs, ended_pods(obs) | set(plan.targets)):  # its pods alone are released
            return end_trials(obs, "gave_up", plan.targets, plan.message or plan.reason, history)
    return Decision(
        plan.kind,  # type: ignore[arg-type]
        plan.reason,
        _ACTIONS[plan.act],  # type: ignore[arg-type]
        plan.message,
        plan=plan,
        state="recovering",
    )
