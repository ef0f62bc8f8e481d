"""Whole rounds (observe -> decide -> act -> record) against a moto bucket, with the stack's outputs, node 0
and billing faked and an actuator that records instead of running Pulumi: two supervisors at once act once,
a forged run state alerts and never releases, a dry run changes nothing, an unreadable stack is left alone."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import boto3
import pytest

from supervisor.act import Actuator
from supervisor.cli import LEASE_LOST, Round, line_of, main
from supervisor.model import RoundRecord
from supervisor.observe import Sources, StackUnreadable
from tests.common.test_outputs import FORECAST
from tests.polling import poll
from train.node import transfer as node_transfer

pytestmark = pytest.mark.services  # a moto S3 server beside the test

OUTPUTS = {
    "nodes": [{"rank": 0, "ip": "10.1.0.2", "pod_id": "pod1", "ssh_endpoint": "127.0.0.1:2222"}],
    "cost_per_hour": 31.92,
    "workdir": "/workspace/trainstack",
    "forecast": {**FORECAST, "run_cost_usd": 64.0},  # the record common/outputs.py parses
}


class Recorder(Actuator):
    """The actuator with its three effects recorded; `release` waits on `gate` (the test opens it)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__("dev", Path("."), protect=False, webhook_url=None, log=lambda _l: None)
        self.calls: list[str] = []
        self.gate = gate

    def notify(self, text: str) -> str:
        self.calls.append(f"notify: {text}")
        return "notify: recorded"

    def sync(self, outputs: Any) -> str:
        self.calls.append("sync")
        return "sync: recorded"

    def release(self) -> str:
        self.calls.append("release")
        if self.gate is not None:
            assert self.gate.wait(timeout=60)
        return "release: recorded"


@pytest.fixture
def s3(moto_s3: str) -> Any:
    return boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"round-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def config_of(bucket: str, **supervisor: Any) -> dict[str, Any]:
    raw = {
        "trainstack:bucket": {"value": json.dumps({"name": bucket, "region": "us-east-1"})},
        "trainstack:training": {
            "value": json.dumps({"secrets": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]})
        },
        "trainstack:secrets.ALERT_WEBHOOK_URL": {"value": "[secret]", "secret": True},
        "runpod:apiKey": {"value": "[secret]", "secret": True},
    }
    if supervisor:
        raw["trainstack:supervisor"] = {"value": json.dumps(supervisor)}
    return raw


def finished_run(s3: Any, bucket: str, tmp_path: Path) -> None:
    s3.put_object(Bucket=bucket, Key="trainstack/dev-pod-0/step-50.pt", Body=b"w" * 4096)
    env = {
        "TRAINSTACK_RUN_ID": "dev-pod-0.pod1",
        "NODE_RANK": "0",
        "NUM_NODES": "1",
        "TRAINSTACK_PROGRESS_FILE": str(tmp_path / "none.jsonl"),
        "TRAINSTACK_FINISH_WAIT_S": "0",
    }
    node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, env)


def make_round(s3: Any, raw: dict[str, Any], actuator: Actuator, **kw: Any) -> Round:
    state = {
        "time": 1_800_000_000.0,
        "nodes": [{"node": "pod1", "ok": True, "gpu_util_mean": 0.9, "step": 50}],
    }
    return Round(
        "dev",
        Path("."),
        s3=s3,
        sources=Sources(
            aggregator=lambda _s, _o: state, billing=lambda _o, **_kw: 12.5, s3=s3, ssh_key=lambda: True
        ),
        actuator=actuator,
        read=lambda _w, _s: (OUTPUTS, raw),
        clock=lambda: 1_800_000_030.0,
        log=lambda _l: None,
        **kw,
    )


def test_finished_run_is_released_once_with_a_summary_and_an_audit_line(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    finished_run(s3, bucket, tmp_path)
    actor = Recorder()
    record = make_round(s3, config_of(bucket), actor).run_once()
    assert record.decision.kind == "finished" and record.done == ("release", "summary")
    assert actor.calls[0] == "release"
    assert actor.calls[1].startswith("notify: released compute")
    assert "steps: 50" in actor.calls[2] and "spent $12.50 (forecast $64.00)" in actor.calls[2]
    line = line_of(record)
    assert set(line) >= {
        "stack",
        "round_at",
        "state",
        "decision",
        "reason",
        "actions",
        "spent_usd",
        "usd_per_hour",
    }
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="supervisor/dev/audit/")["Contents"]]
    assert len(keys) == 1
    text = s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read().decode()
    assert "[secret]" not in text and "apiKey" not in text and "ALERT_WEBHOOK_URL" not in text


def test_two_supervisors_at_once_exactly_one_acts(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    gate = threading.Event()
    actors = [Recorder(gate), Recorder(gate)]
    records: list[RoundRecord] = []

    def go(actor: Recorder) -> None:
        records.append(make_round(s3, config_of(bucket), actor).run_once())

    threads = [threading.Thread(target=go, args=(a,)) for a in actors]
    for t in threads:
        t.start()
    # the loser returns while the winner still holds the lease inside its (gated) release
    poll(
        lambda: len(records) == 1,
        "one supervisor done while the other releases",
        timeout_s=60,
        interval_s=0.05,
    )
    gate.set()
    for t in threads:
        t.join(timeout=60)
    assert sum(a.calls.count("release") for a in actors) == 1
    assert sorted(r.errors for r in records) == [(), (LEASE_LOST,)]


def test_forged_run_state_alerts_and_never_releases(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    key = "run/dev-pod-0.pod1/state.json"
    state = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    state["checkpoint"]["sha256"] = "f" * 64
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(state).encode())
    actor = Recorder()
    first = make_round(s3, config_of(bucket), actor).run_once()
    assert first.decision.kind == "unverified" and "release" not in actor.calls
    assert actor.calls and actor.calls[0].startswith("notify: ALERT") and "sha256" in actor.calls[0]
    again = make_round(s3, config_of(bucket), actor).run_once()  # alerted once, from the audit history
    assert again.decision.actions == () and len(actor.calls) == 1


def test_dry_run_decides_and_changes_nothing(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    for raw, flag in ((config_of(bucket), True), (config_of(bucket, dry_run=True), False)):
        actor = Recorder()
        record = make_round(s3, raw, actor, dry_run=flag).run_once()
        assert record.decision.kind == "finished" and record.dry_run and record.done == ()
        assert actor.calls == []
        written = s3.list_objects_v2(Bucket=bucket, Prefix="supervisor/dev/").get("Contents", [])
        # --dry-run leaves no audit line (the ledger and the next rounds' history read them); a stack set
        # to trainstack:supervisor.dry_run keeps recording its rounds (its rules count episodes from them)
        assert [o["Key"] for o in written if "/audit/" in o["Key"]] == ([] if flag else [ANY])


def test_disabled_supervisor_observes_but_never_acts(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    actor = Recorder()
    record = make_round(s3, config_of(bucket, enabled=False), actor).run_once()
    assert record.decision.kind == "none" and "enabled is false" in record.decision.reason
    assert actor.calls == []


def test_unreadable_stack_exits_2_and_says_which(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No Pulumi project here: pulumi cannot read the stack, so the supervisor must not act.
    assert main(["nosuchstack", "--cwd", str(tmp_path), "--once"]) == 2
    assert "not acting on 'nosuchstack'" in capsys.readouterr().err


def test_bad_supervisor_config_is_unreadable(s3: Any, bucket: str) -> None:
    bad = config_of(bucket, interval_min=-1)
    with pytest.raises(StackUnreadable, match=r"trainstack:supervisor\.interval_min"):
        make_round(s3, bad, Recorder()).run_once()


def test_the_ledger_line_of_scripts_watch_comes_from_the_rounds_in_the_bucket(s3: Any, bucket: str) -> None:
    """Three rounds 5 min apart (compute up, node 0 answering, the step moving): the run's ledger as
    scripts/watch shows it, every category named, priced against RunPod's bill."""
    from supervisor import store
    from supervisor.model import Decision, Observation
    from supervisor.report import ledger_line

    raw = config_of(bucket)
    read = lambda _w, _s: raw  # noqa: E731
    assert ledger_line("dev", Path("."), s3=s3, read=read) is None  # no round yet: nothing to show
    t0 = 1_800_000_000.0
    for i, (step, spent) in enumerate([(None, 0.0), (100, 2.66), (200, 5.32)]):
        obs = Observation(
            at=t0 + 300 * i,
            phase="active",
            nodes=1,
            node0_reachable=step is not None,
            step=step,
            spent_usd=spent,
            usd_per_hour=31.92,
        )
        store.write_audit(s3, bucket, RoundRecord("dev", obs, Decision("none", "training runs")))
    line = ledger_line("dev", Path("."), s3=s3, read=read)
    assert line is not None
    # 10 min of 8 GPUs: 5 min before node 0 answered (boot), 5 min of steps (productive).
    assert line.startswith("ledger: goodput 50.0% of 1.33 GPU-h: productive 0.67 / boot 0.67 / "), line
    assert "gate+burn-in 0.00 / checkpoint 0.00 / lost 0.00 / recovery 0.00 / idle 0.00 GPU-h" in line
    assert "within 0.0% of RunPod's bill" in line


def test_a_pools_finished_trial_ends_its_own_pod_through_the_actuator_and_the_audit_line_says_which(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    """Issue #42, pools: trial 0 finished (its run state verifies), trial 1 still steps with busy GPUs. The
    round decides `trial_ended`, the actuator ends pod 0's trial alone (run.ended_trials), and the audit
    line carries the trial it ended; the next round reads that and does not repeat the message."""
    finished_run(s3, bucket, tmp_path)  # run dev-pod-0.pod1: finished, verifies
    raw = config_of(bucket)
    raw["trainstack:cluster"] = {"value": json.dumps({"topology": "pods", "nodes": 2})}
    outputs = {
        **OUTPUTS,
        "topology": "pods",
        "nodes": [
            {"rank": 0, "ip": "10.1.0.2", "pod_id": "pod1", "ssh_endpoint": "127.0.0.1:2222"},
            {"rank": 1, "ip": "10.1.0.3", "pod_id": "pod2", "ssh_endpoint": "127.0.0.1:2223"},
        ],
    }
    state = {
        "time": 1_800_000_000.0,
        "nodes": [
            {"node": "pod1", "ok": True, "gpu_util_mean": 0.0, "step": 50},
            {"node": "pod2", "ok": True, "gpu_util_mean": 0.9, "step": 70},
        ],
    }
    ended: list[tuple[int, ...]] = []

    class Ends(Recorder):
        def end_trials(self, trials: Any) -> str:
            ended.append(tuple(trials))
            return "end trials: recorded"

    actor = Ends()
    sources = Sources(
        aggregator=lambda _s, _o: state, billing=lambda _o, **_kw: 12.5, s3=s3, ssh_key=lambda: True
    )

    def round_at(at: float) -> Any:
        return Round(
            "dev",
            Path("."),
            s3=s3,
            sources=sources,
            actuator=actor,
            read=lambda _w, _s: (outputs, raw),
            clock=lambda: at,
            log=lambda _l: None,
        ).run_once()

    record = round_at(1_800_000_030.0)
    assert (record.decision.kind, record.done, record.decision.trials) == (
        "trial_ended",
        ("notify", "end_trials"),
        (0,),
    )
    assert ended == [(0,)] and "finished at step 50" in actor.calls[0] and "pod2" in actor.calls[0]
    again = round_at(1_800_000_330.0)  # the update failed to land, say: ended again, told once
    assert again.done == ("end_trials",) and ended == [(0,), (0,)]
    assert len([c for c in actor.calls if c.startswith("notify")]) == 1


def test_end_trials_merges_the_stacks_own_list_and_sets_each_index_by_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Actuator.end_trials reads run.ended_trials from the stack's config (what another round may have
    written) and sets the union index by index (`--path`: Pulumi stores integers), then updates."""

    from supervisor import act

    class Stack:
        def __init__(self) -> None:
            self.set: list[tuple[str, str]] = []

        def config(self) -> dict[str, Any]:  # as `pulumi config --json` gives a path-set section: an object
            return {"trainstack:run": {"ended_trials": [2]}}

        def set_config(self, key: str, value: str) -> None:
            self.set.append((key, value))

    stack = Stack()
    lines: list[str] = []
    actor = Actuator("search", Path("."), protect=True, policy_pack=None, log=lines.append)
    ups: list[str] = []
    monkeypatch.setattr(act, "pulumi_up", lambda _stack, what, *_a, **_kw: ups.append(what))
    monkeypatch.setattr(act, "select_stack", lambda *_a: stack)
    assert "trial(s) 0" in actor.end_trials((0,))
    assert stack.set == [
        ("trainstack:run.releasing_trials[0]", "0"),  # a protected stack lifts the protection first
        ("trainstack:run.ended_trials[0]", "0"),
        ("trainstack:run.ended_trials[1]", "2"),
    ]
    assert ups == ["trainstack:run.releasing_trials=[0]", "trainstack:run.ended_trials=[0, 2]"]
    assert act._run_list(stack, "trainstack:run.phase") == []
