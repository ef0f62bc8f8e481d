"""The nodes' own restarts count against max_recoveries (issue #66): read from the bucket's
`run/<run id>/node-restarts/` (train/node/watchdog.py writes them), counted by the recovery rule with its
own attempts (a pool: per trial), past the bound the run is given up with the node restarts named. No I/O:
a fake bucket."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

from stackconfig.supervisor import RecoveryConfig
from supervisor.decide import Policy, decide
from supervisor.faults import Attempt, Fleet, NodeFacts, NodeRestart, restarts_of
from supervisor.model import Observation, RunState
from supervisor.observe import node_restarts
from supervisor.recover import assess

T0 = 1_800_000_000.0
MIN = 60.0
POLICY = Policy(cap_usd=1000.0, recovery=RecoveryConfig())  # max_recoveries 3, backoff 10 min


def node(rank: int) -> NodeFacts:
    return NodeFacts(rank=rank, pod_id=f"p{rank}", reachable=True, step=100.0, step_time_s=1.0)


def restart(at_min: float, pod: str = "p0", cause: str = "hang", rank: int | None = None) -> NodeRestart:
    at = T0 + at_min * MIN
    return NodeRestart(f"run/r/node-restarts/{at:.0f}-{pod}.json", pod, cause, at, rank)


def attempt(at_min: float, kind: str = "job_failed", **kw: Any) -> Attempt:
    return Attempt(T0 + at_min * MIN, kind, (), "US-TX-3", "done", **kw)


def obs(f: Fleet, at_min: float = 600.0, **kw: Any) -> Observation:
    base = Observation(
        at=T0 + at_min * MIN,
        phase="active",
        nodes=len(f.nodes),
        node0_reachable=True,
        aggregator_age_s=30.0,
        gpu_util_max=0.9,
        step=100.0,
        spent_usd=10.0,
        usd_per_hour=127.0,
        fleet=f,
        pods=tuple(n.pod_id for n in f.nodes),
        ranks=tuple(n.rank for n in f.nodes),
        node_steps=tuple(n.step for n in f.nodes),
        topology=f.topology,
    )
    return replace(base, **kw)


FAILED = RunState("prod.p0", "failed", exit_status=1, finished_at=T0 + 500 * MIN, failure="nccl_timeout")


def test_node_restarts_with_the_supervisors_attempts_reach_max_recoveries_and_the_run_is_given_up() -> None:
    """Before: two attempts of three, the nodes' two restarts unseen: a third recovery of the job."""
    f = Fleet(
        "cluster",
        ("US-TX-3",),
        (node(0), node(1)),
        (attempt(0), attempt(60)),
        (restart(100, "p1", "hang"), restart(300, "p0", "xid")),
    )
    d = decide(obs(f, runs=(FAILED,)), [], POLICY)
    assert d.kind == "gave_up" and "release" in d.actions
    assert "2 node restarts by the nodes' watchdogs (1 hang, 1 xid)" in d.message
    assert "max_recoveries 3" in d.message


def test_under_the_bound_the_node_restarts_number_the_next_recovery() -> None:
    f = Fleet("cluster", ("US-TX-3",), (node(0), node(1)), (), (restart(100),))
    plan = assess(obs(f, runs=(FAILED,)), [], POLICY)
    assert plan is not None and plan.act == "restart" and "(recovery 2)" in plan.reason


def test_node_restarts_alone_past_the_bound_give_the_run_up_without_a_fault_this_round() -> None:
    """torchrun's --max-restarts may be larger than max_recoveries: the supervisor holds its own bound."""
    made = tuple(restart(m, "p0") for m in (10, 100, 200))
    healthy = Fleet("cluster", ("US-TX-3",), (node(0), node(1)), (), made)
    assert decide(obs(healthy), [], POLICY).kind != "gave_up"  # three of three: still within
    over = replace(healthy, node_restarts=(*made, restart(300, "p1", "xid")))
    d = decide(obs(over), [], POLICY)
    assert d.kind == "gave_up" and "release" in d.actions
    assert "node p1 restarted the job itself (xid)" in d.message and "4 node restarts" in d.message


def test_one_hang_ended_by_several_nodes_at_once_is_one_restart() -> None:
    made = (restart(100, "p0"), restart(100.5, "p1"), restart(100.2, "p2"), restart(200, "p0"))
    assert [r.node for r in restarts_of(made)] == ["p0", "p0"]
    assert len(restarts_of((*made, restart(100.3, "p3", "xid")))) == 3  # another cause is another restart


def test_a_pool_trial_counts_its_own_node_restarts_only() -> None:
    made = tuple(restart(m, "p1", rank=1) for m in (10, 100, 200))
    f = Fleet("pods", (), (node(0), node(1)), (), made)
    failed0 = RunState("prod-pod-0.p0", "failed", exit_status=1, finished_at=T0, failure="nccl_timeout")
    running = (RunState("prod-pod-0.p0", "running"), RunState("prod-pod-1.p1", "running"))
    plan = assess(obs(f, runs=(failed0, running[1])), [], POLICY)
    assert plan is not None and plan.kind == "job_failed" and plan.act == "restart", plan
    over = replace(f, node_restarts=(*made, restart(300, "p1", rank=1)))
    d = decide(obs(over, runs=running), [], POLICY)
    assert d.kind == "gave_up" and "p1" in d.message and "trial" in d.message  # trial 1's pod alone


class Bucket:
    """list_objects_v2 / get_object over a dict; `broken` raises on listing."""

    def __init__(self, objects: dict[str, bytes], broken: bool = False) -> None:
        self.objects, self.broken = objects, broken

    def list_objects_v2(self, Bucket: str, Prefix: str) -> dict[str, Any]:
        if self.broken:
            raise ConnectionError("endpoint unreachable")
        return {"Contents": [{"Key": k} for k in sorted(self.objects) if k.startswith(Prefix)]}

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[Key])}


def test_observe_reads_each_jobs_node_restarts_with_its_trial() -> None:
    record = {"at": T0, "node": "p1", "cause": "hang", "reason": "no step", "ranks": [2, 3], "bundle": None}
    bucket = Bucket(
        {
            "run/a/node-restarts/1-p1.json": json.dumps(record).encode(),
            "run/b/node-restarts/2-p2.json": b"{not json",
            "run/b/exit/0.json": b"{}",
        }
    )
    problems: list[str] = []
    found = node_restarts(bucket, "bkt", ["a", "b"], [1, 2], problems)
    assert [(r.node, r.cause, r.rank) for r in found] == [("p1", "hang", 1), ("?", "?", 2)]
    assert problems == ["node restarts: run/b/node-restarts/2-p2.json does not parse: counted as one"]


def test_a_bucket_that_cannot_be_read_is_a_problem_line_never_a_crash() -> None:
    problems: list[str] = []
    assert node_restarts(Bucket({}, broken=True), "bkt", ["a"], [None], problems) == ()
    assert problems == ["node restarts: bucket not read (ConnectionError)"]
