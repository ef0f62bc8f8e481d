"""What `scripts/watch` shows (and the supervisor decides from), assembled without I/O: a row per node,
alerts, money.

Sources (stackview/sources.py gathers them): the stack's outputs (nodes, cost per hour), each job's
aggregator state (per-node golden metrics and firing alerts, docs/MONITORING.md), RunPod's billing endpoints
(what the stack's pods, cluster and volume have cost so far) and, for a node SSH never reached, the pod's
last log lines from RunPod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from common.outputs import nodes_of


@dataclass(frozen=True)
class NodeView:
    """One row of the table; None where the source had nothing."""

    rank: int
    pod_id: str
    reachable: bool | None  # the aggregator's last round scraped its agent; None: unknown (no state read)
    gpu_util_mean: float | None = None  # ratio 0..1
    gpu_util_min: float | None = None
    gpu_mem_max_gb: float | None = None
    gpu_temp_max_c: float | None = None
    busbw_gb_per_s: float | None = None
    nvme_p99_us: float | None = None
    step: float | None = None
    step_time_s: float | None = None
    checkpoint_s: float | None = None  # the job's seconds saving checkpoints since it started
    health_s: float | None = None  # the node's health checks' time on this boot
    alerts: tuple[str, ...] = ()  # rules firing on this node
    note: str = ""  # why a value is missing (agent unreachable, never reached SSH, ...)
    log_tail: tuple[str, ...] = ()  # last log lines of a node whose agent did not answer
    log_source: str = ""  # "training log" (its start script's, over SSH) or "RunPod log" (the container's)
    exited: str = (
        ""  # its start script ended: "failed" | "finished" | "stopped" (its exit record); "": running
    )


@dataclass(frozen=True)
class MoneyView:
    """USD. `spent_usd` is RunPod's own billing when it could be read, else price x time (see `source`)."""

    cost_per_hour_usd: float
    spent_usd: float | None
    source: str
    projected_usd: float | None
    forecast_usd: float | None
    budget_usd: float | None


@dataclass(frozen=True)
class WatchSnapshot:
    stack: str
    time: float
    nodes: tuple[NodeView, ...]
    firing: tuple[Mapping[str, Any], ...]
    money: MoneyView
    aggregator_age_s: float | None  # how old the aggregator's last round is; None: no state read
    problems: tuple[str, ...] = field(default=())  # sources that could not be read, in one line each
    ledger: str | None = None  # the run's goodput ledger, one line (supervisor/ledger.py watch_line)
    # Billed resources of the account that no stack's state holds (ops/reconcile.py), one mapping each:
    # kind, id, name, usd_per_hour, age_s, action, line. Empty: none, or not looked (then `problems` says).
    unowned: tuple[Mapping[str, Any], ...] = field(default=())
    slurm_queue: tuple[str, ...] = ()  # a `scheduler: slurm` stack's squeue lines (docs/SLURM.md)

    @property
    def critical(self) -> bool:
        """What makes `scripts/watch` exit non-zero: a critical alert, or a node nobody can reach."""
        return any(a.get("severity") == "critical" for a in self.firing) or any(
            n.reachable is False or n.exited == "failed" for n in self.nodes
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["critical"] = self.critical
        return data


def _num(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def build(
    *,
    stack: str,
    now: float,
    outputs: Mapping[str, Any],
    aggregator: Mapping[str, Any] | None,
    billed_usd: float | None,
    forecast_usd: float | None,
    logs: Mapping[str, Sequence[str]],
    problems: Sequence[str] = (),
    node0_answered: bool = False,
    log_sources: Mapping[str, str] | None = None,
    ledger: str | None = None,
    exits: Mapping[str, Any] | None = None,
) -> WatchSnapshot:
    """Join the sources by rank: the aggregator's rows are in hostfile (= rank) order.

    `exits`: pod id -> the node's exit record (train/node/exitrecord.py) for nodes whose start script ended;
    such a node shows that it exited, how, and its log's last lines, whatever the aggregator says.

    `node0_answered`: no state was read, but node 0 did answer over SSH (it has no aggregator state)."""
    out_nodes = nodes_of(outputs)  # ContractError naming a malformed key
    rows = list((aggregator or {}).get("nodes") or [])
    firing = tuple(a for a in (aggregator or {}).get("firing") or [] if isinstance(a, Mapping))
    views = []
    for i, node in enumerate(out_nodes):
        pod_id = node.pod_id
        row: Mapping[str, Any] = rows[i] if i < len(rows) and isinstance(rows[i], Mapping) else {}
        name = str(row.get("node", ""))
        mem = _num(row, "gpu_mem_used_bytes_max")
        reachable: bool | None
        if row:
            reachable, note = bool(row.get("ok")), str(row.get("error") or "")
        elif aggregator is None and i == 0 and not node0_answered:  # node 0 did not answer over SSH
            reachable, note = False, "node 0 not reachable over SSH (see problems)"
        else:
            reachable, note = None, "no aggregator state"
        record = (exits or {}).get(pod_id)
        tail, source, exited = tuple(logs.get(pod_id, ())), (log_sources or {}).get(pod_id), ""
        if record is not None:
            exited = record.status
            note = f"start script exited: {record.status} in {record.phase} (exit {record.exit_status})" + (
                f": {record.reason}" if record.reason else ""
            )
            tail, source = tuple(record.log_tail[-5:]), "exit record"
        views.append(
            NodeView(
                rank=node.rank,
                pod_id=pod_id,
                reachable=reachable,
                gpu_util_mean=_num(row, "gpu_util_mean"),
                gpu_util_min=_num(row, "gpu_util_min"),
                gpu_mem_max_gb=None if mem is None else mem / 1e9,
                gpu_temp_max_c=_num(row, "gpu_temp_max_c"),
                busbw_gb_per_s=_num(row, "busbw_gb_per_s"),
                nvme_p99_us=_num(row, "nvme_write_p99_us"),
                step=_num(row, "step"),
                step_time_s=_num(row, "step_time_s"),
                checkpoint_s=_num(row, "checkpoint_s"),
                health_s=_num(row, "health_s"),
                alerts=tuple(str(a.get("rule")) for a in firing if name and a.get("node") == name),
                note=note,
                log_tail=tail,
                log_source=source or ("log" if tail else ""),
                exited=exited,
            )
        )
    cost = float(outputs.get("cost_per_hour") or 0.0)
    agg_money = (aggregator or {}).get("money") or {}
    started = (aggregator or {}).get("started_at")
    if billed_usd is not None:
        spent, source = billed_usd, "RunPod billing"
    elif isinstance(started, int | float):
        spent, source = cost * max(0.0, now - started) / 3600, "stack price x time since the run started"
    else:
        spent, source = None, "unknown (no billing, no aggregator)"
    budget = agg_money.get("budget_usd") or None
    money = MoneyView(cost, spent, source, agg_money.get("projected_usd"), forecast_usd, budget)
    age = (
        now - float(aggregator["time"])
        if aggregator and isinstance(aggregator.get("time"), int | float)
        else None
    )
    return WatchSnapshot(stack, now, tuple(views), firing, money, age, tuple(problems), ledger)
