"""The hostile review of the decision table (issue #42), one named test per finding: each is the shrunk
counter-example of an invariant of test_lifecycle_properties.py that the code before the issue broke."""

from __future__ import annotations

from dataclasses import replace

from stackconfig.supervisor import RecoveryConfig
from supervisor.decide import Policy, decide, spend
from supervisor.faults import Attempt, Fleet, NodeFacts
from supervisor.model import Decision, ExitFacts, Observation, RoundRecord, RunState

T0 = 1_800_000_000.0
MIN = 60.0
POLICY = Policy(cap_usd=10_000.0)
RECOVERY = Policy(cap_usd=10_000.0, recovery=RecoveryConfig())


def obs(at_min: float, **kw: object) -> Observation:
    base = Observation(
        at=T0 + at_min * MIN,
        phase="active",
        nodes=1,
        node0_reachable=True,
        gpu_util_max=0.9,
        step=100.0 + at_min,
        spent_usd=10.0,
        usd_per_hour=255.0,
        pods=("p0",),
        node_steps=(100.0 + at_min,),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def rounds(until_min: float, every: float = 5.0, **kw: object) -> list[RoundRecord]:
    return [
        RoundRecord("prod", obs(m * every, **kw), Decision("none", "")) for m in range(int(until_min / every))
    ]


PREFLIGHT = ExitFacts(
    0,
    "p0",
    "failed",
    "preflight",
    127,
    "preflight failed (exit 127); see above",
    ("/workspace/trainstack/start-node-0.sh: line 243: torchrun: command not found",),
)


def test_1_a_start_script_that_died_at_preflight_is_released_at_the_next_round_with_its_log_tail() -> None:
    """Before: `none: training runs: step None` for 20 min and on to the cap (~39 h on prod)."""
    now = obs(5, step=None, node_steps=(None,), gpu_util_max=None, exits=(PREFLIGHT,))
    d = decide(now, rounds(5, step=None, node_steps=(None,), gpu_util_max=None), POLICY)
    assert (d.kind, d.actions) == ("failed_to_start", ("release",))
    assert "torchrun: command not found" in d.message and "preflight" in d.reason


def test_1_a_job_that_writes_nothing_and_never_steps_is_released_after_boot_timeout() -> None:
    history = rounds(30, step=None, node_steps=(None,), gpu_util_max=None)
    d = decide(obs(30, step=None, node_steps=(None,), gpu_util_max=None), history, POLICY)
    assert (d.kind, d.actions) == ("never_started", ("release",))
    early = decide(obs(25, step=None, node_steps=(None,), gpu_util_max=None), history[:5], POLICY)
    assert early.kind == "none" and early.state == "booting"


def _pool(at_min: float, **kw: object) -> Observation:
    """search: 4 pods, pod 0's trial finished first (its aggregator's state frozen), three still training."""
    runs = kw.pop("runs", None) or (
        RunState("search-pod-0.p0", "finished", verified=True, last_step=500),
        *(RunState(f"search-pod-{i}.p{i}", "absent") for i in (1, 2, 3)),
    )
    return obs(
        at_min,
        nodes=4,
        pods=("p0", "p1", "p2", "p3"),
        topology="pods",
        runs=runs,
        step=500.0,
        node_steps=(500.0, 300.0, 300.0, 300.0),
        gpu_util_max=0.9,
        aggregator_round=T0,
        **kw,
    )


def test_2_a_pool_is_not_released_while_other_trials_train_after_pod_0_finished() -> None:
    """Before: pod 0's stopped aggregator read as idle and released all four pods ~75 min later."""
    history = [RoundRecord("search", _pool(m), Decision("none", "")) for m in range(0, 120, 5)]
    d = decide(_pool(120), history, RECOVERY)
    assert "release" not in d.actions and "recover" not in d.actions, d


def test_2_a_pool_is_released_when_its_last_trial_ends() -> None:
    done = tuple(RunState(f"search-pod-{i}.p{i}", "finished", verified=True, last_step=500) for i in range(4))
    d = decide(_pool(120, runs=done), [], RECOVERY)
    assert (d.kind, d.actions) == ("finished", ("release", "summary"))


def test_3_no_ssh_key_on_a_healthy_cluster_is_an_alert_never_a_replace() -> None:
    """Before: every round 'unreachable', the cluster replaced three times, then released."""
    nodes = tuple(NodeFacts(r, f"p{r}", reachable=False, status="RUNNING") for r in range(2))
    fleet = Fleet("cluster", ("US-TX-3",), nodes)
    seen = dict(node0_reachable=False, ssh_key=False, step=None, node_steps=(None, None), gpu_util_max=None)
    history: list[RoundRecord] = []
    kinds = []
    for m in range(0, 120, 5):
        now = obs(m, nodes=2, pods=("p0", "p1"), fleet=fleet, **seen)
        d = decide(now, history, RECOVERY)
        kinds.append((d.kind, d.actions))
        history.append(RoundRecord("prod", now, d, done=d.actions))
    assert kinds[0] == ("unreachable", ("notify",))
    assert all(k == ("unreachable", ()) for k in kinds[1:]), kinds


def test_4_a_finished_run_whose_checkpoint_does_not_verify_is_never_released_by_idle() -> None:
    forged = RunState("prod.p0", "finished", verified=False, why="sha256 differs")
    history = [
        RoundRecord("prod", obs(m, step=500.0, gpu_util_max=0.01, runs=(forged,)), Decision("none", ""))
        for m in range(0, 120, 5)
    ]
    d = decide(obs(120, step=500.0, gpu_util_max=0.01, runs=(forged,)), history, POLICY)
    assert d.kind == "unverified" and "release" not in d.actions


def test_5_an_nccl_timeout_is_retried_within_max_recoveries_then_given_up() -> None:
    attempts = tuple(
        Attempt(T0 + m * MIN, "job_failed", (), "US-TX-3", "done", cause="nccl_timeout") for m in (0, 60, 180)
    )
    fleet = Fleet("cluster", ("US-TX-3",), (NodeFacts(0, "p0", True, step=100.0),), attempts)
    failed = RunState("prod.p0", "failed", exit_status=1, finished_at=T0 + 400 * MIN, failure="nccl_timeout")
    d = decide(obs(600, fleet=fleet, runs=(failed,)), [], RECOVERY)
    assert d.kind == "gave_up" and "release" in d.actions


def test_6_the_cap_holds_while_billing_cannot_be_read() -> None:
    """Before: spend unknown, over_budget never fired."""
    created = T0 - 39.2 * 3600  # RunPod created the pods 39.2 h ago: at $255/h, $9,996
    now = obs(0, spent_usd=None, created_at=created)
    spent, how = spend(now, [])
    assert spent is not None and spent >= 39.2 * 255 and how.startswith("bounded")
    d = decide(now, [], POLICY)
    assert d.kind == "over_budget" and "release" in d.actions


def test_6_the_bound_continues_from_the_last_bill_read() -> None:
    history = [RoundRecord("prod", obs(0, spent_usd=9_950.0), Decision("none", ""))]
    d = decide(obs(10, spent_usd=None), history, POLICY)  # 9,950 + 10 min at $255/h = 9,992.50
    assert d.kind == "over_budget" and "release" in d.actions


def test_7_a_stale_aggregator_is_released_at_idle_for_plus_grace_not_twice_idle_for() -> None:
    """Before: its age was counted once to start the episode and again to act (release at 75 min)."""
    history: list[RoundRecord] = []
    released = None
    for m in range(0, 120, 5):
        now = obs(m, step=100.0, node_steps=(100.0,), aggregator_round=T0)
        d = decide(now, history, POLICY)
        history.append(RoundRecord("prod", now, d, done=d.actions))
        if "release" in d.actions:
            released = m
            break
    assert released == 45  # warned at 30 (idle_for_min), released 15 min later (idle_grace_min)


def test_7_a_future_dated_or_repeated_audit_line_does_not_stop_idle_looking_back() -> None:
    idle = dict(step=100.0, node_steps=(100.0,), gpu_util_max=0.02)
    history = rounds(30, **idle)
    ahead = RoundRecord("prod", obs(240, step=7.0), Decision("none", "a supervisor whose clock runs ahead"))
    d = decide(obs(30, **idle), [*history, ahead, ahead], POLICY)
    assert d.kind == "idle" and d.actions == ("notify",)


def test_7_a_failed_state_is_news_by_identity_whatever_the_nodes_clock_says() -> None:
    """Before: the node's finish time was compared with the supervisor's clock: a node clock 1 h behind
    dated a new failure before the last recovery, and the failure was never answered."""
    attempts = (Attempt(T0, "job_failed", (), "US-TX-3", "done", answered=("prod.p0@1799990000.0",)),)
    fleet = Fleet("cluster", ("US-TX-3",), (NodeFacts(0, "p0", True, step=100.0),), attempts)
    behind = RunState("prod.p0", "failed", exit_status=1, finished_at=T0 - 3600)  # after it, on a slow clock
    d = decide(obs(60, fleet=fleet, runs=(behind,)), [], RECOVERY)
    assert d.kind == "job_failed" and d.actions == ("recover",)


def test_7_the_budget_warning_is_sent_once_per_run_not_once_an_hour() -> None:
    warned = decide(obs(0, spent_usd=8_500.0), [], POLICY)
    assert warned.actions == ("notify",) and warned.once == "over_budget:0.8"
    later = decide(obs(120, spent_usd=8_800.0, notices=(warned.once,)), [], POLICY)  # past the audit window
    assert later.kind != "over_budget" or "notify" not in later.actions


def test_7_a_utilisation_exactly_at_the_threshold_is_not_idle() -> None:
    at = dict(step=100.0, node_steps=(100.0,), gpu_util_max=0.29)
    policy = replace(POLICY, idle_util_pct=29.0)
    assert decide(obs(60, **at), rounds(60, **at), policy).kind == "none"  # 0.29 * 100 = 28.999999999999996


def test_a_restarted_job_is_not_ended_by_its_predecessors_exit_record() -> None:
    """Found writing this issue: a training failure leaves its exit record in the bucket under the run id the
    restarted job keeps; read again after the restart, it 'ended' a healthy run (job_ended released it)."""
    crashed = ExitFacts(0, "p0", "failed", "training", 1, "training exited with status 1", at=1_799_999_000.0)
    failed = RunState("prod.p0", "failed", exit_status=1, finished_at=1_799_999_000.0)
    fleet = Fleet("cluster", ("US-TX-3",), (NodeFacts(0, "p0", True, step=100.0),))
    first = decide(obs(0, fleet=fleet, runs=(failed,), exits=(crashed,)), [], RECOVERY)
    assert first.kind == "job_failed" and first.plan is not None and crashed.key in first.plan.answered
    attempt = Attempt(T0, "job_failed", (), "US-TX-3", "done", answered=first.plan.answered)
    after = replace(fleet, attempts=(attempt,))
    again = decide(obs(15, fleet=after, runs=(), exits=(crashed,)), [], RECOVERY)  # stepping again
    assert again.kind == "none" and "release" not in again.actions, again


def test_a_stopped_start_script_is_not_a_run_that_ended() -> None:
    stopped = ExitFacts(0, "p0", "stopped", "training", 143, "SIGTERM", at=1.0)
    d = decide(obs(5, exits=(stopped,)), [], POLICY)
    assert d.kind == "none" and d.actions == (), d


def _finishing(exits: tuple[ExitFacts, ...], runs: tuple[RunState, ...] = ()) -> Observation:
    """A 2-node cluster at its last step: rank 0 writes the run state once both nodes marked their final sync,
    and each node writes its exit record after that (components/templates/start-node.body.bash)."""
    return obs(
        60, nodes=2, pods=("p0", "p1"), node_steps=(1500.0, 1500.0), step=1500.0, exits=exits, runs=runs
    )


PEER_DONE = ExitFacts(1, "p1", "finished", "finish", 0, "", at=1.0)
RANK0_DONE = ExitFacts(0, "p0", "finished", "finish", 0, "", at=2.0)


def test_a_cluster_whose_peer_ended_before_rank_0_wrote_the_run_state_is_finishing_not_ended() -> None:
    """Found by the storm under load (this round): the round fell between node 1's end and rank 0's write of
    the run state, and job_ended released a run that had finished, as a failed one."""
    running = RunState("prod.p0", "absent")
    d = decide(_finishing((PEER_DONE,), (running,)), rounds(60), POLICY)
    assert d.kind == "none" and "release" not in d.actions, d
    # The next round: rank 0 wrote the state and ended.
    done = RunState("prod.p0", "finished", verified=True, last_step=1500)
    assert decide(_finishing((PEER_DONE, RANK0_DONE), (done,)), rounds(65), POLICY).kind == "finished"


def test_a_cluster_whose_nodes_all_ended_without_a_finished_state_is_ended() -> None:
    """Every node ended and no state says finished (rank 0 could not write it): nobody is left to write it."""
    d = decide(_finishing((PEER_DONE, RANK0_DONE), (RunState("prod.p0", "absent"),)), rounds(60), POLICY)
    assert (d.kind, d.actions) == ("job_ended", ("sync", "release", "summary")), d


def test_a_cluster_whose_peer_failed_is_ended_while_rank_0_still_runs() -> None:
    failed = ExitFacts(1, "p1", "failed", "training", 1, "training exited with status 1", at=1.0)
    d = decide(_finishing((failed,), (RunState("prod.p0", "absent"),)), rounds(60), POLICY)
    assert d.kind == "job_ended" and "release" in d.actions, d
