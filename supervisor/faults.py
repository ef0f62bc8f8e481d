"""What recovery needs to know of a round beyond observe.py's observation: each node as scripts/watch saw it,
the pods' RunPod status where it was read, and the recoveries already tried in this run.

Plain frozen records that round-trip through JSON (they ride in the audit line's observation, `fleet`), so a
later round on another machine decides from exactly what this one saw. Recovery attempts have their own small
log in the bucket (`supervisor/<stack>/recoveries/<time>.json`, supervisor/store.py): a round killed in
the middle of a recovery still leaves its `begun` record, so the bound on retries counts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Outcome = Literal["begun", "done", "failed"]
# XID and uncorrected-ECC alerts of the aggregator (train/monitor/evaluate.py): hardware the node cannot fix.
HARDWARE_ALERTS = frozenset({"gpu_xid", "gpu_ecc_uncorrected"})
STRAGGLER_ALERT = "straggler"
# A pod RunPod's listing left out: gone, by that listing's word alone (one listing can omit pods that run:
# a replace then waits for a second signal, supervisor/rules/detect.py).
ABSENT = "ABSENT"
HALTED = frozenset({"EXITED", "ERROR", "TERMINATED", "DEAD", ABSENT})
PodStatus = tuple[str, str | None, float | None]  # RunPod's status, data center, creation (epoch s)


@dataclass(frozen=True)
class NodeFacts:
    """One node this round; None where no source said."""

    rank: int
    pod_id: str
    reachable: bool | None  # the aggregator scraped its agent (node 0: answered over SSH)
    step: float | None = None  # the newest step its agent reports
    step_time_s: float | None = None  # its mean step time (the continuous straggler check reads it)
    alerts: tuple[str, ...] = ()  # aggregator rules firing on this node
    status: str | None = None  # RunPod's status of the pod where read (RUNNING, EXITED, ERROR, ...)
    spot: bool = False  # rented as spot (auto may have got either): EXITED then means taken back
    data_center: str | None = None  # where RunPod placed the pod, where read
    created_at: float | None = None  # when RunPod created the pod (its billing began), where read


@dataclass(frozen=True)
class Attempt:
    """One recovery, as its record in the bucket says."""

    at: float  # when it began
    kind: str  # the decision kind it answered (stalled, node_lost, ...)
    targets: tuple[str, ...]  # pod ids replaced or restarted (empty: the whole cluster)
    data_center: str | None = None  # where the failed nodes ran
    outcome: Outcome = "begun"
    what: str = ""  # what was tried, one line (the audit says it too)
    cause: str | None = None  # a failed job's classified cause (nccl_timeout, oom, config), else None
    # What the replace removed from RunPod: the Instant Cluster ("cluster:<id>") or the pods ("pod:<id>").
    # RunPod keeps billing them under those ids, so a round's bill reads them too.
    replaced: tuple[str, ...] = ()
    # When Pulumi reported the replaced compute deleted (the supervisor's clock): its bill ends there, the
    # new compute's begins at its pods' creation (delete before create). None: not replaced, or not seen.
    released_at: float | None = None
    # The failed run states this attempt answered (RunState.key): a state is news until one answers it, so
    # no clock of a node is ever compared with the supervisor's.
    answered: tuple[str, ...] = ()
    # A pool's trials (pod indices, stable across a replace) this attempt recovered: each trial's recoveries
    # count against its own max_recoveries. Empty: the whole run (a cluster, or an older record).
    trials: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(
            at=float(data["at"]),
            kind=str(data["kind"]),
            targets=tuple(str(t) for t in data.get("targets") or ()),
            data_center=data.get("data_center"),
            outcome=data.get("outcome", "begun"),
            what=str(data.get("what") or ""),
            cause=data.get("cause"),
            replaced=tuple(str(r) for r in data.get("replaced") or ()),
            released_at=float(data["released_at"]) if data.get("released_at") is not None else None,
            answered=tuple(str(k) for k in data.get("answered") or ()),
            trials=tuple(int(t) for t in data.get("trials") or ()),
        )


@dataclass(frozen=True)
class NodeRestart:
    """One restart a node's own watchdog made (train/node/watchdog.py), as the bucket keeps it
    (`run/<run id>/node-restarts/<time>-<node>.json`): it counts against `max_recoveries`."""

    key: str  # its object's key: its identity
    node: str  # the pod whose watchdog ended its ranks
    cause: str  # hang | xid
    at: float  # the node's clock: compared with other nodes' records, never with the supervisor's
    rank: int | None = None  # a pool's trial (its pod index); None: a cluster's job


# Records of one cause this close together (node clocks) are one restart of the job: every node of a
# cluster sees the same silence, and more than one may end its ranks before torchrun's rendezvous moves.
SAME_RESTART_S = 60.0


def restarts_of(records: Sequence[NodeRestart], ranks: set[int] | None = None) -> list[NodeRestart]:
    """The job restarts the records tell (the first record of each), a pool's `ranks` only where given."""
    chosen = sorted(
        (r for r in records if ranks is None or r.rank in ranks), key=lambda r: (r.rank or 0, r.cause, r.at)
    )
    out: list[NodeRestart] = []
    for r in chosen:
        last = out[-1] if out else None
        if last and (last.rank, last.cause) == (r.rank, r.cause) and r.at - last.at <= SAME_RESTART_S:
            continue
        out.append(r)
    return out


@dataclass(frozen=True)
class Fleet:
    """The nodes of the stack this round and the run's recoveries so far."""

    topology: Literal["cluster", "pods"]
    data_centers: tuple[str, ...]  # the stack's candidates, in order (a cluster has exactly one)
    nodes: tuple[NodeFacts, ...]
    attempts: tuple[Attempt, ...] = field(default=())  # oldest first
    node_restarts: tuple[NodeRestart, ...] = field(default=())  # the nodes' own, this run's jobs

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fleet:
        return cls(
            topology=data.get("topology", "pods"),
            data_centers=tuple(data.get("data_centers") or ()),
            nodes=tuple(
                NodeFacts(**{**n, "alerts": tuple(n.get("alerts") or ())}) for n in data.get("nodes") or ()
            ),
            attempts=tuple(Attempt.from_json(a) for a in data.get("attempts") or ()),
            node_restarts=tuple(NodeRestart(**r) for r in data.get("node_restarts") or ()),
        )


def fleet_of(
    topology: Literal["cluster", "pods"],
    data_centers: Sequence[str],
    views: Sequence[Any],
    statuses: Mapping[str, PodStatus] | None = None,
    spot: bool = False,
    attempts: Sequence[Attempt] = (),
    node_restarts: Sequence[NodeRestart] = (),
) -> Fleet:
    """The fleet from scripts/watch's rows (stackview.snapshot.NodeView) and the pods' RunPod status."""
    statuses = statuses or {}
    nodes = tuple(
        NodeFacts(
            rank=v.rank,
            pod_id=v.pod_id,
            reachable=v.reachable,
            step=v.step,
            step_time_s=v.step_time_s,
            alerts=tuple(v.alerts),
            status=statuses[v.pod_id][0] if v.pod_id in statuses else None,
            spot=spot,
            data_center=statuses[v.pod_id][1] if v.pod_id in statuses else None,
            created_at=statuses[v.pod_id][2] if v.pod_id in statuses else None,
        )
        for v in views
    )
    return Fleet(
        topology,
        tuple(data_centers),
        nodes,
        tuple(sorted(attempts, key=lambda a: a.at)),
        tuple(node_restarts),
    )


def current_runs(runs: Sequence[Any], attempts: Sequence[Attempt]) -> tuple[Any, ...]:
    """The run states still news: a `failed` one a recovery answered (the restarted job keeps its run id
    until it writes its state again) is dropped, so no rule reads it again. By identity (`RunState.key`),
    never by the node's finish time against the supervisor's clock."""
    answered = {k for a in attempts for k in a.answered}
    return tuple(r for r in runs if not (r.status == "failed" and r.key in answered))


def news(run: Any, attempts: Sequence[Attempt]) -> bool:
    """A failed run state no recovery answered yet, by identity (the node's finish time was
    compared with the supervisor's clock, so a node clock behind it hid a failure, one ahead re-answered it).
    """
    return not any(run.key in a.answered for a in attempts)


def _epoch(iso: str | None) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() if iso else None
    except ValueError:
        return None


def pod_statuses(pod_ids: Sequence[str]) -> dict[str, PodStatus]:
    """RunPod's (status, data center) of each pod in one listing (one the listing lacks: ABSENT). The listing
    includes Instant Cluster members: without `includeClusterPods` RunPod leaves them out, and every node of
    a healthy cluster would read as gone."""
    from providers.runpod.client import RunPodClient  # the RunPod records load only when asked

    with RunPodClient.from_env() as client:
        listed = {p.id: (p.status, p.data_center_id, _epoch(p.created_at)) for p in client.list_all_pods()}
    return {pod_id: listed.get(pod_id, (ABSENT, None, None)) for pod_id in pod_ids}
