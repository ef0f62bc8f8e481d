"""A `scheduler: slurm` stack decided by Slurm's own states (issue #63, supervisor/rules/slurm.py): a job held
or pending is Slurm's wait, never a stall; NODE_FAIL and PREEMPTED wait for Slurm's requeue; a job a person
cancelled is never submitted again (neither by a recovery's restart nor by the submitter); a cluster with a
job running or pending is never released by another job's end; TIMEOUT and OUT_OF_MEMORY end the run with
their reason. Rows, the submitter run with stand-ins for Slurm's commands, and generated job-state runs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.slurm import render_submit
from stackconfig.supervisor import RecoveryConfig
from supervisor.decide import RULES, Policy, decide
from supervisor.faults import Fleet, NodeFacts
from supervisor.model import Decision, Observation, RoundRecord, RunState
from supervisor.rules.base import Rule
from supervisor.slurm import FINAL, SlurmJob, exit_facts, outcome, queue_reading
from tests.components.test_slurm_render import STACK, _config

T0 = 1_800_000_000.0
MIN = 60.0
PODS = ("p0", "p1")
POLICY = Policy(cap_usd=0.0, recovery=RecoveryConfig())  # recovery on: hang_after_min 10, 3 recoveries


def _owned(rule: Rule) -> Rule:
    """The rule, checked: every decision it makes carries a state it declares it owns."""

    def checked(o: Observation, h: Sequence[RoundRecord], p: Policy) -> Decision | None:
        d = rule(o, h, p)
        assert d is None or d.state in rule.owns, (rule.name, d)
        return d

    return replace(rule, decide=checked)


CHECKED = tuple(_owned(r) for r in RULES)


def slurm_obs(r: int, state: str, step: float, other: str | None = None, failed: bool = False) -> Observation:
    """Round r of a 2-node Slurm cluster whose own job (id 7) is in `state`; `other`: another job of the
    queue (PENDING or RUNNING); `failed`: its start script wrote a failed run state (killed by Slurm)."""
    jobs = [SlurmJob("7", STACK, state, "1:0" if outcome(state) == "failed" else "0:0", PODS)]
    if other:
        jobs.append(SlurmJob("8", "second", other))
    word = outcome(state)
    runs = (
        (RunState("run-p0", "finished", verified=True, last_step=int(step)),)
        if word == "finished"
        else (RunState("run-p0", "failed", exit_status=143, finished_at=float(r)),)
        if failed and word in ("failed", "stopped", "lost")
        else ()
    )
    running = word == "running" or other == "RUNNING"  # a job runs: the GPUs are busy
    nodes = tuple(
        NodeFacts(i, p, True, step, 1.0, status="RUNNING", data_center="X") for i, p in enumerate(PODS)
    )
    return Observation(
        at=T0 + r * 5 * MIN,
        phase="active",
        nodes=2,
        node0_reachable=True,
        gpu_util_max=0.9 if running else 0.02,
        step=step,
        spent_usd=1.0 + r,
        usd_per_hour=12.0,
        runs=runs,
        fleet=Fleet("cluster", ("X",), nodes),
        pods=PODS,
        node_steps=(step, step),
        exits=exit_facts(jobs[0], PODS, ()),
        ranks=(0, 1),
        aggregator_round=T0 + r,
        slurm_queue=queue_reading(jobs),
        slurm_job="7",
        slurm_state=state,
    )


def play(
    states: Sequence[str], others: Sequence[str | None] = (), failed: bool = False, policy: Policy = POLICY
) -> list[Decision]:
    history: list[RoundRecord] = []
    out: list[Decision] = []
    step = 0.0
    for r, state in enumerate(states):
        step += 100.0 if outcome(state) == "running" else 0.0
        other = others[r] if r < len(others) else None
        o = slurm_obs(r, state, step, other, failed)
        d = decide(o, history, policy, CHECKED)
        out.append(d)
        history.append(RoundRecord("slurm", o, d, done=d.actions))
        if "release" in d.actions:
            break
    return out


def test_a_job_held_after_training_is_slurms_wait_not_a_stall() -> None:
    """Before: read as a stall, restarted three times, then released."""
    decisions = play(["RUNNING"] * 3 + ["PENDING"] * 24)
    assert len(decisions) == 27 and not any(d.actions for d in decisions), [d.reason for d in decisions]
    assert {d.state for d in decisions[3:]} == {"queued"}


def test_node_fail_waits_for_the_requeue_and_training_goes_on() -> None:
    """Before: a failure, released within one round."""
    decisions = play(["RUNNING"] * 2 + ["NODE_FAIL"] + ["REQUEUED"] * 2 + ["RUNNING"] * 3, failed=True)
    assert not any(d.actions for d in decisions), [(d.kind, d.reason) for d in decisions]
    assert decisions[2].kind == "recovering" and "requeue" in decisions[2].reason


def test_a_job_never_requeued_is_released_on_the_queues_clock() -> None:
    decisions = play(["RUNNING"] + ["PREEMPTED"] * 30)
    assert not any(d.actions for d in decisions[1:3])  # waits for the requeue (hang_after_min 10)
    assert "release" in decisions[-1].actions and decisions[-1].kind == "idle"


def test_a_cancelled_job_is_never_restarted() -> None:
    """Before: each restart submitted it again (CANCELLED was not among the submitter's skipped states)."""
    decisions = play(["RUNNING"] * 2 + ["CANCELLED by 1000"] * 30, failed=True)
    assert not any("recover" in d.actions for d in decisions), [(d.kind, d.reason) for d in decisions]
    assert "release" in decisions[-1].actions and decisions[-1].kind == "idle"  # the queue's empty clock


def test_another_jobs_end_never_releases_a_cluster_with_a_job_running() -> None:
    """Before: job_ended lacked the guard `finished` has."""
    for policy in (POLICY, Policy(cap_usd=0.0)):  # recovery on (its restarts), and off
        decisions = play(["FAILED"] * 6, others=["RUNNING"] * 6, failed=True, policy=policy)
        assert not any("release" in d.actions for d in decisions), [(d.kind, d.reason) for d in decisions]


def test_timeout_and_out_of_memory_end_the_run_with_their_reason() -> None:
    for state in ("TIMEOUT", "OUT_OF_MEMORY"):
        decisions = play(["RUNNING", state], failed=True)
        last = decisions[-1]
        assert last.kind == "job_ended" and state in last.reason and "release" in last.actions, last
        assert FINAL[state].split(";")[0] in last.reason


def _submitter(tmp_path: Path, squeue: str, sacct: str) -> list[str]:
    """The rendered submitter, run with stand-ins for sinfo, squeue, sacct and sbatch; what sbatch got."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    calls = tmp_path / "sbatch.calls"
    fakes = {
        "sinfo": "printf 'p0\\np1\\n'",
        "squeue": f"printf '%s' {squeue!r}",
        "sacct": f"printf '%s' {sacct!r}",
        "sbatch": f'echo "$@" >> {calls}; echo 9',
    }
    for name, body in fakes.items():
        (bin_ / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_ / name).chmod(0o755)
    config = _config()
    config = config.model_copy(
        update={"training": config.training.model_copy(update={"workdir": str(tmp_path)})}
    )
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(STACK, config))
    env = {**os.environ, "PATH": f"{bin_}:/usr/bin:/bin", "NODE_RANK": "0"}
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def test_the_submitter_never_submits_a_job_a_person_cancelled(tmp_path: Path) -> None:
    assert _submitter(tmp_path / "a", "", "") != []  # nothing of that name: submitted
    assert _submitter(tmp_path / "b", "7 CANCELLED\n", "") == []  # slurmctld still holds it
    assert _submitter(tmp_path / "c", "", "7|CANCELLED by 1000\n") == []  # only slurmdbd remembers it
    assert _submitter(tmp_path / "d", "", "7|COMPLETED\n") != []  # a finished job may run again


# ---- generated Slurm job-state sequences ---------------------------------------------------------------

STATES = (
    "RUNNING",
    "PENDING",
    "REQUEUED",
    "NODE_FAIL",
    "PREEMPTED",
    "CANCELLED by 1000",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "FAILED",
    "COMPLETED",
    "SUSPENDED",
)


@dataclass
class SlurmRun:
    states: list[str]
    others: list[str | None]
    failed: bool


@st.composite
def slurm_runs(draw: st.DrawFn) -> SlurmRun:
    segments = draw(st.lists(st.tuples(st.sampled_from(STATES), st.integers(1, 6)), min_size=1, max_size=6))
    states = ["RUNNING"]
    for state, n in segments:  # an ended job's id stays ended (a requeue keeps NODE_FAIL's, PREEMPTED's)
        if outcome(states[-1]) in ("finished", "failed", "stopped"):
            state = states[-1]
        states += [state] * n
    others = draw(
        st.lists(
            st.sampled_from([None, None, "PENDING", "RUNNING"]), min_size=len(states), max_size=len(states)
        )
    )
    return SlurmRun(states, others, draw(st.booleans()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slurm_runs())
def test_generated_slurm_runs_keep_slurms_word(run: SlurmRun) -> None:
    decisions = play(run.states, run.others, run.failed)
    cancelled = False
    for r, d in enumerate(decisions):
        state = run.states[r]
        cancelled = cancelled or state.startswith("CANCELLED")
        o = slurm_obs(r, state, 0.0, run.others[r], run.failed)
        if cancelled:  # no job a person cancelled is submitted again: no restart re-delivers it
            assert "recover" not in d.actions, (r, d)
        if o.slurm_queue in ("running", "queued"):  # a job runs or waits: nothing releases the cluster
            assert "release" not in d.actions, (r, d)
        if outcome(state) == "queued":  # Slurm's wait: never a stall, never idle
            assert d.kind not in ("stalled", "idle"), (r, d)
        if outcome(state) == "lost" and (r == 0 or run.states[r - 1] != state):
            assert not d.actions, (r, d)  # a node Slurm lost: the requeue is waited for
