"""Pools and single glitches (issue #63): a pool's trials each have their own recovery budget and their own
one-time messages; nothing destructive (a replace, a release) is done to a run that trains on one round's
evidence from one source; an outage is alerted once per episode, not once per run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stackconfig.supervisor import RecoveryConfig
from supervisor import store
from supervisor.decide import Policy, decide
from supervisor.faults import ABSENT, Attempt, Fleet, NodeFacts
from supervisor.localstore import LOCAL_BUCKET, DirObjects
from supervisor.model import Decision, Observation, RoundRecord

T0 = 1_800_000_000.0
MIN = 60.0
RATE = 127.0  # $/h
POLICY = Policy(cap_usd=1000.0, recovery=RecoveryConfig())
DESTRUCTIVE = ("release", "recover", "end_trials")


def node(rank: int, **kw: object) -> NodeFacts:
    base = NodeFacts(rank, f"p{rank}", True, 100.0 * (rank + 1), 1.0, status="RUNNING", data_center="X")
    return replace(base, **kw)  # type: ignore[arg-type]


def training(r: int, *nodes: NodeFacts, topology: str = "cluster", **kw: object) -> Observation:
    """Round r of a run that trains: every node steps (r steps on), GPUs busy, billing answers."""
    nodes = nodes or (node(0), node(1))
    nodes = tuple(replace(n, step=(n.step or 0) + 10 * r) for n in nodes)
    attempts: tuple[Attempt, ...] = kw.pop("attempts", ())  # type: ignore[assignment]
    base = Observation(
        at=T0 + r * 5 * MIN,
        phase="active",
        nodes=len(nodes),
        node0_reachable=True,
        gpu_util_max=0.9,
        step=max(n.step or 0 for n in nodes),
        spent_usd=RATE * r * 5 / 60,
        usd_per_hour=RATE,
        fleet=Fleet(topology, ("X",), nodes, attempts),  # type: ignore[arg-type]
        pods=tuple(n.pod_id for n in nodes),
        node_steps=tuple(n.step for n in nodes),
        ranks=tuple(n.rank for n in nodes),
        topology=topology,
        aggregator_round=T0 + r,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def rounds(observations: list[Observation], policy: Policy = POLICY) -> list[Decision]:
    history: list[RoundRecord] = []
    out = []
    for o in observations:
        d = decide(o, history, policy)
        out.append(d)
        history.append(RoundRecord("prod", o, d, done=d.actions))
    return out


# ---- pools -------------------------------------------------------------------------------------------------


def test_a_trials_budget_is_its_own() -> None:
    """Before: trial 0's three restarts used the pool's max_recoveries, and trial 1's preempted pod was given
    up instead of rented again."""
    spent = tuple(
        Attempt(T0 - m * MIN, "job_failed", ("p0",), "X", "done", trials=(0,)) for m in (300, 200, 100)
    )
    gone = node(1, status="EXITED", spot=True, reachable=False)
    d = decide(training(10, node(0), gone, topology="pods", attempts=spent), [], POLICY)
    assert (d.kind, d.actions) == ("preempted", ("recover",)), d.reason
    assert d.plan is not None and d.plan.targets == ("p1",) and d.plan.trials == (1,)
    stuck = decide(
        training(
            10, node(0, status="EXITED", spot=True, reachable=False), node(1), topology="pods", attempts=spent
        ),
        [],
        POLICY,
    )
    assert stuck.kind == "gave_up" and "end_trials" in stuck.actions  # trial 0's own budget is spent


def test_a_trials_message_is_kept_whatever_other_trials_do(tmp_path: Path) -> None:
    """Before: kept under the set of the run's ids, so it was sent again when another trial ended."""
    mem = DirObjects(tmp_path)
    store.write_notice(mem, LOCAL_BUCKET, "search", ("r0", "r1", "r2"), "trial_ended:r0", T0)
    assert "trial_ended:r0" in store.read_notices(mem, LOCAL_BUCKET, "search", ("r1", "r2"))
    store.write_notice(mem, LOCAL_BUCKET, "search", ("r0", "r1"), "over_budget:0.8", T0)
    assert "over_budget:0.8" in store.read_notices(mem, LOCAL_BUCKET, "search", ("r1",))  # the same run


def test_a_run_message_is_not_repeated_when_its_cluster_is_replaced(tmp_path: Path) -> None:
    """Before: the budget warning and the missing-key alert were kept under the set of the run's ids, so a
    replaced cluster's new run id (or a pool trial's end) sent them again. They are about the stack's run:
    once per run, which ends with its compute (store.end_run); the next run is told anew, once."""
    mem = DirObjects(tmp_path)
    run_messages = ("over_budget:0.8", "unreachable:no_key")
    for key in run_messages:
        store.write_notice(mem, LOCAL_BUCKET, "prod", ("prod-pod-a-0",), key, T0)
    replaced = store.read_notices(mem, LOCAL_BUCKET, "prod", ("prod-pod-b-0",))  # the new cluster's run id
    assert set(run_messages) <= set(replaced), replaced
    assert store.end_run(mem, LOCAL_BUCKET, "prod", T0 + 600)  # a round without compute: the run is over
    assert not store.end_run(mem, LOCAL_BUCKET, "prod", T0 + 900)  # once: the new run has sent nothing
    assert store.read_notices(mem, LOCAL_BUCKET, "prod", ("prod-pod-c-0",)) == ()
    store.write_notice(mem, LOCAL_BUCKET, "prod", ("prod-pod-c-0",), "over_budget:0.8", T0 + 1200)
    assert store.read_notices(mem, LOCAL_BUCKET, "prod", ("prod-pod-d-0",)) == ("over_budget:0.8",)


# ---- two signals before anything destructive ---------------------------------------------------------------


def test_one_listing_that_omits_the_pods_replaces_nothing() -> None:
    """Before: one RunPod listing without the pods recreated a training cluster (SkyPilot #10123)."""
    omitted = (node(0, status=ABSENT), node(1, status=ABSENT))
    once = rounds([training(0), training(1, *omitted), training(2)])
    assert not any(a in d.actions for d in once for a in DESTRUCTIVE), [d.reason for d in once]
    twice = rounds([training(0), training(1, *omitted), training(2, *omitted)])
    assert "recover" in twice[-1].actions and twice[-1].kind == "node_lost"
    gone = (node(0, status=ABSENT, reachable=False), node(1, status=ABSENT, reachable=False))
    agreed = rounds([training(0), training(1, *gone)])  # the nodes agree: a second source
    assert "recover" in agreed[-1].actions


def test_one_billing_spike_releases_nothing() -> None:
    spike = rounds([training(0), training(1), training(2, spent_usd=5_000.0), training(3)])
    assert not any("release" in d.actions for d in spike), [d.reason for d in spike]
    assert "not releasing on one reading" in spike[2].reason


def test_an_outage_is_alerted_once_per_episode() -> None:
    """Before: one SSH blip spent the run's one `unreachable` alert; a later long outage was silent."""
    down = {"node0_reachable": False}
    seq = [training(0), training(1, **down), training(2), training(3, **down), training(4, **down)]
    notified = [i for i, d in enumerate(rounds(seq, Policy(cap_usd=0.0))) if "notify" in d.actions]
    assert notified == [1, 3]


@dataclass
class Glitches:
    kinds: list[str]


@st.composite
def glitches(draw: st.DrawFn) -> Glitches:
    """Per round one glitch or none, never the same one two rounds in a row, and a billing spike always
    between two readings of the true bill (a second reading of it is a second signal)."""
    out: list[str] = ["none"]  # the first bill read is taken as it is (nothing to compare it with)
    apart = {("spike", "no_billing"), ("no_billing", "spike")}
    for _ in range(draw(st.integers(4, 14))):
        kinds = ("none", "omitted", "spike", "ssh", "no_billing")
        choices = [k for k in kinds if not out or (k != out[-1] and (out[-1], k) not in apart)]
        out.append(draw(st.sampled_from([*choices, "none"])))
    return Glitches(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(glitches(), st.sampled_from(["cluster", "pods"]))
def test_no_destructive_action_on_a_single_rounds_evidence(g: Glitches, topology: str) -> None:
    observations = []
    for r, kind in enumerate(g.kinds):
        if kind == "omitted":
            o = training(r, node(0, status=ABSENT), node(1, status=ABSENT), topology=topology)
        elif kind == "spike":
            o = training(r, topology=topology, spent_usd=50_000.0)
        elif kind == "ssh":
            o = training(r, topology=topology, node0_reachable=False, gpu_util_max=None, step=None)
        elif kind == "no_billing":
            o = training(r, topology=topology, spent_usd=None)
        else:
            o = training(r, topology=topology)
        observations.append(o)
    for r, d in enumerate(rounds(observations)):
        assert not any(a in d.actions for a in DESTRUCTIVE), (r, g.kinds, d)
