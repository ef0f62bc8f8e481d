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
from dataclasses import replace

from stackconfig.supervisor import data_center_order
from supervisor.faults import Attempt, Fleet, NodeRestart, restarts_of
from supervisor.model import Decision, Observation, Plan, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.detect import NODE_FAULTS, WHY_NEVER, Fault, find_fault
from supervisor.rules.pool import end_trials, ended_pods, jobs_left


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def _failed_twice(fleet: Fleet, current: str | None) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for dc in [a.data_center for a in fleet.attempts if a.kind in NODE_FAULTS] + [current]:
        if dc:
            counts[dc] = counts.get(dc, 0) + 1
    return tuple(sorted(dc for dc, n in counts.items() if n >= 2))


def _counted(fleet: Fleet, fault: Fault | None = None) -> list[Attempt]:
    """The attempts that count against this fault's max_recoveries, oldest first, whatever their cause:
    every one of the run, a cluster's; a pool's trial has a budget of its own (issue #63: one trial's
    failures used up the pool's), so only the attempts that recovered its trials (by pod index, which a
    replace keeps; an older record by its pod ids) or the whole pool."""
    if fleet.topology != "pods" or fault is None or not fault.nodes:
        return list(fleet.attempts)
    return _of_trials(fleet, {n.rank for n in fault.nodes}, {n.pod_id for n in fault.nodes})


def _of_trials(fleet: Fleet, ranks: set[int], pods: set[str]) -> list[Attempt]:
    return [
        a
        for a in fleet.attempts
        if (set(a.trials) & ranks) or (not a.trials and (not a.targets or set(a.targets) & pods))
    ]


def _node_made(fleet: Fleet, fault: Fault | None = None) -> list[NodeRestart]:
    """The restarts the nodes' watchdogs made that count with the attempts (issue #66): the run's, a pool
    trial's own."""
    if fleet.topology != "pods" or fault is None or not fault.nodes:
        return restarts_of(fleet.node_restarts)
    return restarts_of(fleet.node_restarts, {n.rank for n in fault.nodes})


def _tally(attempts: Sequence[Attempt], made: Sequence[NodeRestart], bound: int) -> str:
    """`after N recoveries this run (...)`, the nodes' own restarts named with their causes."""
    tried = ", ".join(a.kind for a in attempts) or "none"
    on_nodes = ""
    if made:
        causes: dict[str, int] = {}
        for r in made:
            causes[r.cause] = causes.get(r.cause, 0) + 1
        named = ", ".join(f"{n} {c}" for c, n in sorted(causes.items()))
        on_nodes = f" and {len(made)} node restarts by the nodes' watchdogs ({named})"
    return (
        f"after {len(attempts)} recoveries by the supervisor ({tried}){on_nodes} this run "
        f"(max_recoveries {bound})"
    )


def _past_bound(fleet: Fleet, bound: int) -> Plan | None:
    """No fault this round, but the nodes' own restarts took the run (a pool: a trial) past max_recoveries:
    given up, released (a pool's trial: its pods)."""
    groups: list[tuple[set[int], tuple[str, ...]]] = []
    if fleet.topology == "pods":
        for node in fleet.nodes:
            groups.append(({node.rank}, (node.pod_id,)))
    else:
        groups.append((set(), ()))
    for ranks, pods in groups:
        if ranks:
            attempts = _of_trials(fleet, ranks, set(pods))
            made = restarts_of(fleet.node_restarts, ranks)
        else:
            attempts, made = list(fleet.attempts), restarts_of(fleet.node_restarts)
        if made and len(attempts) + len(made) > bound:
            last = made[-1]
            text = (
                f"gave up, here is why: node {last.node} restarted the job itself ({last.cause}) past the "
                f"bound, {_tally(attempts, made, bound)}"
            )
            return Plan("gave_up", text, "release", pods, message=text)
    return None


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
        over = _past_bound(fleet, rc.max_recoveries)
        if over is not None:
            return over
        if obs.phase == "recovering":
            return Plan(
                "recovering", "the recovered nodes answer: trainstack:run.phase back to active", "finish"
            )
        return None
    if not fault.confirmed:
        return Plan(
            fault.kind,
            f"{fault.kind}: {fault.reason}: said once, by RunPod's listing alone: replaced when the next "
            "round or the nodes agree (two signals before anything destructive)",
            "none",
        )
    placed = [n.data_center for n in fault.nodes if n.data_center]
    dc = placed[0] if placed else fleet.data_centers[0] if len(fleet.data_centers) == 1 else None
    if fault.retry == "never":
        why = WHY_NEVER.get(fault.cause or "", "not a transient fault")
        text = f"gave up, here is why: {fault.reason}; never retried: {why}"
        return Plan("gave_up", text, "release", tuple(n.pod_id for n in fault.nodes), message=text)
    counted = _counted(fleet, fault)
    made = _node_made(fleet, fault)
    if len(counted) + len(made) >= rc.max_recoveries:
        text = f"gave up, here is why: {fault.reason}, {_tally(counted, made, rc.max_recoveries)}"
        return Plan("gave_up", text, "release", tuple(n.pod_id for n in fault.nodes), message=text)
    if counted:
        wait = rc.backoff_min * 60 * 2 ** (len(counted) - 1)
        since = obs.at - counted[-1].at
        if since < wait:
            return Plan(
                fault.kind,
                f"{fault.kind}: {fault.reason}; next recovery in {_minutes(wait - since)} (backoff after "
                f"{len(counted)} this run)",
                "none",
            )
    plan = _plan(obs, fault, fleet, dc, len(counted) + len(made) + 1)
    if fleet.topology == "pods" and fault.nodes:
        plan = replace(plan, trials=tuple(sorted({n.rank for n in fault.nodes})))
    # What this recovery answers: the failed run states and exit records of the jobs it restarts or replaces
    # (a pool's: the targeted trials' only; the others' stay news).
    pods = set(plan.targets) if obs.topology == "pods" and plan.targets else set(obs.pods)
    runs_of = dict(zip(obs.job_ids, obs.pods, strict=False)) if obs.topology == "pods" else {}
    answered = (
        *(r.key for r in obs.runs if r.status == "failed" and runs_of.get(r.run_id, "*") in pods | {"*"}),
        *(e.key for e in obs.ended if not pods or e.pod_id in pods),
    )
    return replace(plan, answered=answered, cause=fault.cause)


def _plan(obs: Observation, fault: Fault, fleet: Fleet, dc: str | None, n: int) -> Plan:
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
    # A pool's trial given up while other trials run: they own the stack; its pods alone are released.
    if (
        plan.act == "release"
        and obs.topology == "pods"
        and plan.targets
        and jobs_left(obs, ended_pods(obs) | set(plan.targets))
    ):
        return end_trials(obs, "gave_up", plan.targets, plan.message or plan.reason, history)
    return Decision(
        plan.kind,  # type: ignore[arg-type]
        plan.reason,
        _ACTIONS[plan.act],  # type: ignore[arg-type]
        plan.message,
        plan=plan,
        state="recovering",
    )
