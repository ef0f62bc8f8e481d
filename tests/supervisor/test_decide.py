"""decide() as a table: each row an observation, the rounds before it, the policy -> the decision's kind and
actions, and a word the reason must carry. No I/O: the supervisor's judgement alone."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from supervisor.decide import Policy, decide
from supervisor.model import Decision, Observation, RoundRecord, RunState

T0 = 1_800_000_000.0
MIN = 60.0
POLICY = Policy(cap_usd=1000.0)  # the defaults, a $1000 cap


def obs(at_min: float = 0.0, **kw: object) -> Observation:
    base = Observation(
        at=T0 + at_min * MIN,
        phase="active",
        nodes=1,
        node0_reachable=True,
        aggregator_age_s=30.0,
        gpu_util_max=0.9,
        step=100.0,
        spent_usd=10.0,
        usd_per_hour=31.92,
        forecast_usd=64.0,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def past(o: Observation, kind: str = "none", done: tuple[str, ...] = ()) -> RoundRecord:
    return RoundRecord("dev", o, Decision(kind, "earlier", tuple(done)), done=done)  # type: ignore[arg-type]


FINISHED = RunState("dev-pod-0.p1", "finished", verified=True, last_step=500, final_loss=0.12)
FORGED = RunState("dev-pod-0.p1", "finished", verified=False, why="the sha256 ... is not the one")
FAILED = RunState("dev-pod-0.p1", "failed", exit_status=1)
IDLE = {"gpu_util_max": 0.02}


def idle_rounds(until_min: float, every: float = 5.0, **kw: object) -> list[RoundRecord]:
    """Idle rounds from minute 0 up to (not including) `until_min`, at step 100."""
    count = int(until_min / every)
    return [past(obs(i * every, **{**IDLE, **kw})) for i in range(count)]


@dataclass(frozen=True)
class Row:
    name: str
    now: Observation
    history: tuple[RoundRecord, ...]
    kind: str
    actions: tuple[str, ...]
    says: str
    policy: Policy = POLICY


ROWS = [
    Row("training runs", obs(), (), "none", (), "training runs"),
    Row("released stack", obs(phase="released", nodes=0, node0_reachable=None), (), "none", (), "no compute"),
    Row(
        "killed mid-release: finish it",
        obs(phase="released", nodes=1),
        (),
        "releasing",
        ("release", "summary"),
        "finishing",
    ),
    Row(
        "releasing (protect lifted) left half-way",
        obs(phase="releasing"),
        (),
        "releasing",
        ("release", "summary"),
        "remain",
    ),
    Row("finished and verified", obs(runs=(FINISHED,)), (), "finished", ("release", "summary"), "verifies"),
    Row(
        "one of two jobs finished",
        obs(nodes=2, runs=(FINISHED, RunState("dev-pod-1.p2", "absent"))),
        (),
        "none",
        (),
        "training runs",
    ),
    Row(
        "forged run state: alert, never release", obs(runs=(FORGED,)), (), "unverified", ("notify",), "sha256"
    ),
    Row(
        "forged, already alerted",
        obs(5, runs=(FORGED,), notices=("unverified:dev-pod-0.p1",)),
        (),
        "unverified",
        (),
        "not releasing",
    ),
    Row("under warn_at", obs(spent_usd=700.0), (), "none", (), "training runs"),
    Row("past warn_at: one warning", obs(spent_usd=800.0), (), "over_budget", ("notify",), "80%"),
    Row(
        "past warn_at, warned before (this run's notices)",
        obs(10, spent_usd=850.0, notices=("over_budget:0.8",)),
        (),
        "none",
        (),
        "training runs",
    ),
    Row(
        "next round would cross the cap",
        obs(spent_usd=998.0),
        (),
        "over_budget",
        ("sync", "release", "summary"),
        "cap",
    ),
    Row("no cap: never over budget", obs(spent_usd=99_999.0), (), "none", (), "training", Policy(cap_usd=0)),
    Row("idle for 10 min: not yet", obs(10, **IDLE), tuple(idle_rounds(10)), "idle", (), "acts at 30"),
    Row(
        "idle for 30 min: warn",
        obs(30, **IDLE),
        tuple(idle_rounds(30)),
        "idle",
        ("notify",),
        "released in 15",
    ),
    Row(
        "idle, warned 5 min ago",
        obs(35, **IDLE),
        (*idle_rounds(30), past(obs(30, **IDLE), "idle", ("notify",))),
        "idle",
        (),
        "after the grace",
    ),
    Row(
        "idle, warned 15 min ago: sync and release",
        obs(45, **IDLE),
        (
            *idle_rounds(30),
            past(obs(30, **IDLE), "idle", ("notify",)),
            *[past(obs(m, **IDLE)) for m in (35, 40)],
        ),
        "idle",
        ("sync", "release", "summary"),
        "releasing",
    ),
    Row(
        "low GPU but steps advance: not idle for long",
        obs(30, **IDLE),
        tuple(past(obs(m, gpu_util_max=0.02, step=float(m))) for m in range(0, 30, 5)),
        "idle",
        (),
        "acts at 30",
    ),
    Row(
        "a warning of an earlier idle episode does not count",
        obs(100, **IDLE),
        (
            past(obs(10, **IDLE), "idle", ("notify",)),
            past(obs(50)),
            *[past(obs(m, **IDLE)) for m in range(70, 100, 5)],
        ),
        "idle",
        ("notify",),
        "released in 15",
    ),
    Row(
        "no GPU metrics, step stalled for 30 min: warn",
        obs(30, gpu_util_max=None),
        tuple(past(obs(m, gpu_util_max=None)) for m in range(0, 30, 5)),
        "idle",
        ("notify",),
        "no new step",
    ),
    Row(
        "no step for 25 min: booting (image pull, health checks)",
        obs(25, gpu_util_max=None, step=None),
        tuple(past(obs(m, gpu_util_max=None, step=None)) for m in range(0, 25, 5)),
        "none",
        (),
        "booting",
    ),
    Row(
        "no step boot_timeout_min after the compute came up: never started, released",
        obs(30, gpu_util_max=None, step=None),
        tuple(past(obs(m, gpu_util_max=None, step=None)) for m in range(0, 30, 5)),
        "never_started",
        ("release",),
        "never started",
    ),
    Row(
        "GPUs busy at a stalled step: never idle",
        obs(60),
        tuple(past(obs(m)) for m in range(0, 60, 5)),
        "none",
        (),
        "training runs",
    ),
    Row(
        "training exited non-zero, no recovery: released now",
        obs(runs=(FAILED,)),
        (),
        "job_ended",
        ("sync", "release", "summary"),
        "status 1",
    ),
    Row(
        "stale aggregator on an answering node: its round stamp frozen for 30 min (counted once)",
        obs(30, aggregator_round=T0),
        tuple(past(obs(m, aggregator_round=T0)) for m in range(0, 30, 5)),
        "idle",
        ("notify",),
        "aggregator",
    ),
    Row(
        "blind for 5 min", obs(5, node0_reachable=False, spent_usd=None), (), "blind", (), "not acting blind"
    ),
    Row(
        "blind for 15 min: one alert, no action",
        obs(15, node0_reachable=False, spent_usd=None),
        tuple(past(obs(m, node0_reachable=False, spent_usd=None)) for m in (0, 5, 10)),
        "blind",
        ("notify",),
        "not acting blind",
    ),
    Row(
        "no SSH but billing answers: not blind, unreachable: one alert, no action",
        obs(15, node0_reachable=False, gpu_util_max=None, step=None),
        (),
        "unreachable",
        ("notify",),
        "not a lost node",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_decision_table(row: Row) -> None:
    decision = decide(row.now, row.history, row.policy)
    assert (decision.kind, decision.actions) == (row.kind, row.actions), decision.reason
    assert row.says in decision.reason or row.says in decision.message
    assert "\n" not in decision.reason
    if "notify" in decision.actions:
        assert decision.message


def test_decide_is_pure_and_order_of_history_does_not_matter() -> None:
    now, history = obs(45, **IDLE), [*idle_rounds(30), past(obs(30, **IDLE), "idle", ("notify",))]
    assert decide(now, history, POLICY) == decide(now, list(reversed(history)), POLICY)


def test_a_new_rule_is_one_more_function() -> None:
    def recover(o: Observation, _h: object, _p: Policy) -> Decision | None:
        return Decision("none", "recovery would act here") if o.node0_reachable is False else None

    decision = decide(obs(node0_reachable=False), [], POLICY, rules=(recover,))
    assert decision.reason == "recovery would act here"


def test_the_burn_in_is_part_of_the_boot() -> None:
    from stackconfig.supervisor import SupervisorConfig

    policy = Policy.of(SupervisorConfig(boot_timeout_min=30), 1000.0, burn_in_min=20)
    assert policy.boot_timeout_min == 50
    booting = dict(step=None, gpu_util_max=None)
    history = tuple(past(obs(m, **booting)) for m in range(0, 45, 5))
    assert decide(obs(45, **booting), history, policy).kind == "none"  # still in its burn-in
    later = (*history, *(past(obs(m, **booting)) for m in range(45, 50, 5)))
    assert decide(obs(50, **booting), later, policy).kind == "never_started"
