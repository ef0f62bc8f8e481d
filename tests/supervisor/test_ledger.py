"""The goodput ledger (supervisor/ledger.py): every billed GPU-second in one category, the categories add up
to the bill, lost work after a resume that went back, the audit-line adapter, the table and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.faults import Attempt
from supervisor.ledger import (
    CATEGORIES,
    Inputs,
    Point,
    Span,
    build,
    inputs_from_rounds,
    lost_spans,
    plot_png,
    table,
)
from supervisor.model import Decision, Observation, RoundRecord

H = 3600.0
GPUS = 32


def a_run() -> Inputs:
    """10 h on 32 GPUs: 0.2 h boot, 0.25 h burn-in, training to step 500 by 5 h (a 0.1 h checkpoint stall
    at 3 h), a recovery 5-5.5 h that resumed at step 450 (checkpoint) and reached 500 again at 6 h, training
    to 9.5 h, then idle until the release at 10 h."""
    progress = [Point(0.45 * H, 0), Point(3 * H, 300), Point(3.1 * H, 300), Point(5 * H, 500)]
    progress += [Point(5.5 * H, 450), Point(6 * H, 500), Point(9.5 * H, 900), Point(10 * H, 900)]
    return Inputs(
        compute=(Span(0, 10 * H, GPUS),),
        progress=tuple(progress),
        health=(Span(0.2 * H, 0.45 * H),),
        checkpoints=(Span(3 * H, 3.1 * H),),
        recoveries=(Span(5 * H, 5.5 * H),),
        first_answer=(0.2 * H,),
        usd_per_gpu_hour=3.99,
        billed_usd=10 * GPUS * 3.99 * 1.004,  # RunPod's bill, 0.4 % off the ledger's
    )


def test_every_billed_gpu_second_lands_in_one_category() -> None:
    ledger = build(a_run())
    gh = {c: round(ledger.gpu_seconds[c] / H / GPUS, 3) for c in CATEGORIES}
    assert gh == {
        "productive": 7.95,  # 0.45-3, 3.1-5, 6-9.5 h
        "provisioning": 0.2,
        "health": 0.25,
        "checkpoint": 0.1,
        "lost": 0.5,  # 5.5-6: steps 450-500 trained twice
        "recovery": 0.5,
        "idle": 0.5,
    }
    assert sum(ledger.gpu_seconds.values()) == pytest.approx(ledger.billed_gpu_seconds) == 10 * H * GPUS
    assert ledger.goodput == pytest.approx(7.95 / 10)
    assert ledger.agreement is not None and ledger.agreement < 0.01
    assert "goodput 79.5% of 320.0 GPU-h" in ledger.line() and "within 0.4%" in ledger.line()


def test_a_bill_that_disagrees_says_so() -> None:
    run = a_run()
    ledger = build(Inputs(**{**run.__dict__, "billed_usd": run.billed_usd * 1.05}))  # type: ignore[operator]
    assert "DOES NOT agree" in table(ledger)
    assert "agrees (0.40%" in table(build(run))


def test_lost_work_is_only_after_a_resume_that_went_back() -> None:
    assert lost_spans([Point(0, 0), Point(1, 10), Point(2, 20)]) == []
    assert lost_spans([Point(0, 0), Point(1, 20), Point(2, 15), Point(3, 18), Point(4, 21)]) == [Span(2, 4)]


def rec(at_h: float, nodes: int, step: float | None, reachable: bool = True) -> RoundRecord:
    obs = Observation(
        at=at_h * H, phase="active", nodes=nodes, node0_reachable=reachable if nodes else None, step=step,
        spent_usd=None if not nodes else at_h * 127.68, usd_per_hour=127.68 if nodes else 0.0,
    )  # fmt: skip
    return RoundRecord("search", obs, Decision("none", "x"))


def test_from_the_audit_lines() -> None:
    rounds = [rec(0, 4, None, reachable=False), rec(0.5, 4, 0), rec(1, 4, 100), rec(1.5, 4, 100)]
    rounds += [rec(2, 4, 150), rec(2.5, 4, 250), rec(3, 0, None)]
    inputs = inputs_from_rounds(rounds, [Attempt(1.5 * H, "stalled", (), None, "done")], gpus_per_node=8)
    assert inputs.compute == (Span(0, 3 * H, 32),)
    assert inputs.first_answer == (0.5 * H,)
    assert inputs.recoveries == (Span(1.5 * H, 2 * H),)
    assert inputs.usd_per_gpu_hour == pytest.approx(3.99)
    ledger = build(inputs)
    gh = {c: ledger.gpu_seconds[c] / H / 32 for c in CATEGORIES}
    assert gh["provisioning"] == pytest.approx(0.5) and gh["recovery"] == pytest.approx(0.5)
    assert gh["productive"] == pytest.approx(1.0)  # 0.5-1 h and 2-2.5 h
    assert gh["idle"] == pytest.approx(1.0)  # 1-1.5 h (stalled) and 2.5-3 h (before the release)


def test_the_timeline_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = a_run()
    path = tmp_path / "ledger.png"
    plot_png(run, build(run), str(path), "search")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


@pytest.mark.services  # a moto S3 server beside the test
def test_report_reads_the_bucket_and_prints_the_table(
    moto_s3: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import uuid

    import boto3

    from supervisor import store
    from supervisor.report import show_report
    from supervisor.store import write_attempt

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    bucket = f"ledger-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    for r in [
        rec(0, 4, None, reachable=False),
        rec(0.5, 4, 0),
        rec(1, 4, 100),
        rec(1.5, 4, 100),
        rec(2, 4, 150),
    ]:
        store.write_audit(s3, bucket, r)
    write_attempt(s3, bucket, "search", Attempt(1.5 * H, "stalled", (), None, "done", "restart"))
    raw = {
        "trainstack:bucket": {"value": json.dumps({"name": bucket, "region": "us-east-1"})},
        "trainstack:training": {
            "value": json.dumps({"secrets": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]})
        },
    }
    png = tmp_path / "t.png"
    assert show_report("search", tmp_path, png, s3=s3, read=lambda _w, _s: raw) == 0
    out = capsys.readouterr().out
    assert "goodput ledger of search (5 rounds, 1 recoveries)" in out and "recovery stalled" in out
    assert "productive" in out and "RunPod billing $" in out and png.is_file()
    from types import SimpleNamespace

    from supervisor.report import ledger_note

    config = SimpleNamespace(cluster=SimpleNamespace(gpus_per_node=8))
    note = ledger_note(s3, bucket, "search", config, rec(2.5, 4, 250).observation)
    assert note.startswith("; goodput 40.0% of 80.0 GPU-h")  # 2.5 h x 32 GPUs, up to this round


def test_the_compute_bills_from_the_pods_creation_not_from_the_first_round() -> None:
    """RunPod bills from a pod's creation; the first round may see it minutes later. The span starts at the
    creation the listing reported, counted as provisioning; a later span never reaches back before the round
    that saw the compute gone."""
    from dataclasses import replace

    from supervisor.faults import Fleet, NodeFacts

    def created(record: RoundRecord, at: float) -> RoundRecord:
        nodes = tuple(NodeFacts(rank=i, pod_id=f"p{i}", reachable=True, created_at=at) for i in range(4))
        return replace(record, observation=replace(record.observation, fleet=Fleet("cluster", (), nodes)))

    rounds = [created(rec(1, 4, None, reachable=False), 0.75 * H), rec(1.5, 4, 0), rec(2, 4, 100)]
    rounds += [rec(2.5, 0, None), created(rec(3.5, 4, 100), 1.0 * H), rec(4, 4, 200)]
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.compute == (Span(0.75 * H, 2.5 * H, 32), Span(2.5 * H, 4 * H, 32))
    ledger = build(inputs)
    assert ledger.gpu_seconds["provisioning"] / H / 32 == pytest.approx(0.75 + 1.0)


def test_a_replaced_cluster_bills_until_its_delete_and_its_successor_from_its_creation() -> None:
    """Issue #29: a recovery's replace keeps the node count but not the pods. The old cluster's span ends
    where the replace reported it deleted, the new one's begins at its pods' creation: the minutes between
    (delete before create) are billed by no one, so the ledger stays within 1 % of RunPod's bill."""
    from dataclasses import replace

    from supervisor.faults import Fleet, NodeFacts

    def pods(record: RoundRecord, prefix: str, at: float) -> RoundRecord:
        nodes = tuple(
            NodeFacts(rank=i, pod_id=f"{prefix}{i}", reachable=True, created_at=at) for i in range(4)
        )
        return replace(record, observation=replace(record.observation, fleet=Fleet("cluster", (), nodes)))

    rounds = [pods(rec(0, 4, 0), "a", 0.0), pods(rec(1, 4, 100), "a", 0.0)]  # recover at 1 h
    rounds += [pods(rec(1.5, 4, 100), "b", 1.2 * H), pods(rec(2, 4, 200), "b", 1.2 * H)]
    replaced = Attempt(1 * H, "node_lost", (), None, "done", released_at=1.1 * H)
    inputs = inputs_from_rounds(rounds, [replaced], gpus_per_node=8)
    assert inputs.compute == (Span(0, 1.1 * H, 32), Span(1.2 * H, 2 * H, 32))
    # Without the replace's own record, the new pods' creation bounds the old cluster's end.
    assert inputs_from_rounds(rounds, [replace(replaced, released_at=None)], 8).compute == (
        Span(0, 1.2 * H, 32),
        Span(1.2 * H, 2 * H, 32),
    )
    # The same pods throughout (a restart on the same nodes): one span.
    same = [pods(rec(t, 4, 100 * t), "a", 0.0) for t in (0, 1, 1.5, 2)]
    assert inputs_from_rounds(same, [Attempt(1 * H, "stalled", (), None, "done")], 8).compute == (
        Span(0, 2 * H, 32),
    )


def test_a_lost_pod_stops_billing_at_the_last_round_that_saw_it_running() -> None:
    """A host died: RunPod (the local RunPod's meter too) bills the lost pod no more, while its cluster's
    other pods bill on until the replace. The ledger counts its GPUs until the last round that saw it running,
    then only the others', then the new cluster from its creation."""
    from dataclasses import replace

    from supervisor.faults import Fleet, NodeFacts

    def pods(record: RoundRecord, prefix: str, at: float, lost: int | None = None) -> RoundRecord:
        nodes = tuple(
            NodeFacts(
                i, f"{prefix}{i}", i != lost, created_at=at, status="TERMINATED" if i == lost else "RUNNING"
            )
            for i in range(4)
        )
        return replace(record, observation=replace(record.observation, fleet=Fleet("cluster", (), nodes)))

    rounds = [pods(rec(0, 4, 0), "a", 0.0), pods(rec(1, 4, 100), "a", 0.0)]
    rounds += [pods(rec(2, 4, 100), "a", 0.0, lost=3)]  # seen gone at 2 h, and the cluster replaced
    rounds += [pods(rec(3, 4, 100), "b", 2.5 * H), pods(rec(4, 4, 200), "b", 2.5 * H)]
    replaced = Attempt(2 * H, "node_lost", (), None, "done", released_at=2.2 * H)
    inputs = inputs_from_rounds(rounds, [replaced], gpus_per_node=8)
    assert inputs.compute == (Span(0, 1 * H, 32), Span(1 * H, 2.2 * H, 24), Span(2.5 * H, 4 * H, 32))
    assert build(inputs).billed_gpu_seconds / H == pytest.approx(32 + 1.2 * 24 + 1.5 * 32)


def measured(at_h: float, step: float, saving: float | None, checks: float | None = None) -> RoundRecord:
    r = rec(at_h, 4, step)
    obs = Observation(**{**r.observation.__dict__, "checkpoint_s": saving, "health_s": checks})
    return RoundRecord("search", obs, r.decision)


def test_checkpoint_stalls_and_health_checks_come_from_the_durations_the_nodes_measured() -> None:
    """The job's checkpoint_s grows 0 -> 90 -> 270 s, then a new start of the job (a smaller value: counted
    from 0) saves 60 s; the boot's health checks took 600 s. Durations only: no node timestamp is read."""
    rounds = [rec(0, 4, None, reachable=False), measured(0.5, 0, 0.0, 600.0), measured(1, 100, 90.0, 600.0)]
    rounds += [measured(1.5, 200, 270.0, 600.0), measured(2, 300, 60.0, 20.0), rec(2.5, 0, None)]
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.health == (Span(0.5 * H - 600, 0.5 * H),)  # ends where the round first saw a step
    assert inputs.checkpoints == (
        Span(1 * H - 90, 1 * H),
        Span(1.5 * H - 180, 1.5 * H),
        Span(2 * H - 60, 2 * H),
    )
    gs = build(inputs).gpu_seconds
    assert gs["health"] == pytest.approx(600 * 32)
    assert gs["checkpoint"] == pytest.approx((90 + 180 + 60) * 32)
    assert gs["provisioning"] == pytest.approx((0.5 * H - 600) * 32)
    assert gs["productive"] == pytest.approx((1.5 * H - 330) * 32)  # 0.5-2 h less the saves
    assert sum(gs.values()) == pytest.approx(build(inputs).billed_gpu_seconds)


def test_a_duration_longer_than_its_round_interval_stays_inside_it() -> None:
    """A node that says it saved for 2 h between two rounds 30 min apart (or checked its health for longer
    than the boot lasted) moves at most that interval: the ledger still adds up to the bill."""
    rounds = [measured(0, 0, 0.0, 5 * H), measured(0.5, 100, 2 * H), measured(1, 200, 2 * H)]
    rounds += [rec(1.5, 0, None)]
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.health == ()  # the first round saw a step at the compute's start: nothing to carve
    assert inputs.checkpoints == (Span(0, 0.5 * H),)
    ledger = build(inputs)
    assert ledger.gpu_seconds["checkpoint"] == pytest.approx(0.5 * H * 32)
    assert sum(ledger.gpu_seconds.values()) == pytest.approx(ledger.billed_gpu_seconds)


def test_rounds_without_the_durations_leave_health_and_checkpoint_empty() -> None:
    """Audit lines of the last version (no checkpoint_s, no health_s) read as before."""
    rounds = [rec(0, 4, None, reachable=False), rec(0.5, 4, 0), rec(1, 4, 100), rec(1.5, 0, None)]
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.health == () and inputs.checkpoints == ()
    back = RoundRecord.from_json(measured(1, 100, 9.5, 30.0).to_json())
    assert back.observation.checkpoint_s == 9.5 and back.observation.health_s == 30.0


def test_the_timeline_reaches_the_last_step_the_job_finished_at() -> None:
    """A job that finished between two rounds: its run state's last step and finish time end the progress,
    so the timeline's step reaches it (issue #68: it stopped at the last round's step)."""
    from dataclasses import replace

    from supervisor.model import RunState

    rounds = [rec(0, 4, None, reachable=False), rec(0.5, 4, 0), rec(1, 4, 100), rec(1.5, 4, 180)]
    done = RunState("search-0", "finished", True, last_step=200, finished_at=1.6 * H)
    last = rec(2, 4, None)
    rounds.append(replace(last, observation=replace(last.observation, runs=(done,))))
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.progress[-1] == Point(1.6 * H, 200.0)
    assert [p.step for p in inputs.progress] == [0, 100, 180, 200]


def created_at(record: RoundRecord, at: float) -> RoundRecord:
    """The round as RunPod's listing said its pods were created at `at`."""
    from dataclasses import replace

    from supervisor.faults import Fleet, NodeFacts

    nodes = tuple(NodeFacts(rank=i, pod_id=f"p{i}", reachable=True, created_at=at) for i in range(4))
    return replace(record, observation=replace(record.observation, fleet=Fleet("cluster", (), nodes)))


def test_steps_before_the_first_round_count_as_training_by_the_jobs_own_pace() -> None:
    """The compute was created at 0; the supervisor's first round came at 0.5 h (a loop started late) and saw
    step 1800, the next one 3600 at 1 h: the job steps once a second, so it began 1800 s before the first
    round, but never before the compute's start plus the 600 s of health checks the nodes measured. It was
    0.5 h of provisioning and health for a job that trained from its 10th minute."""
    rounds = [created_at(measured(0.5, 1800, 0.0, 600.0), 0.0), measured(1, 3600, 0.0, 600.0)]
    rounds += [rec(1.5, 0, None)]
    inputs = inputs_from_rounds(rounds, [], gpus_per_node=8)
    assert inputs.compute == (Span(0.0, 1.5 * H, 32),)
    assert inputs.progress[0] == Point(600.0, 0.0)
    ledger = build(inputs)
    gs = ledger.gpu_seconds
    assert gs["provisioning"] == 0.0 and gs["health"] == pytest.approx(600 * 32)
    assert gs["productive"] == pytest.approx((1 * H - 600) * 32)  # then idle: no step after 1 h
    assert ledger.goodput == pytest.approx((1 * H - 600) / (1.5 * H))  # was (0.5 h) / 1.5 h
    slow = [created_at(measured(0.5, 900, 0.0, 600.0), 0.0), measured(1, 2700, 0.0, 600.0)]
    gs = build(inputs_from_rounds([*slow, rec(1.5, 0, None)], [], gpus_per_node=8)).gpu_seconds
    assert gs["productive"] == pytest.approx((1 * H - 900) * 32)  # began at 900 s
    assert gs["health"] == pytest.approx(600 * 32)  # the nodes' own 600 s, just before it
    assert gs["provisioning"] == pytest.approx(300 * 32)
    assert sum(gs.values()) == pytest.approx(1.5 * H * 32)
