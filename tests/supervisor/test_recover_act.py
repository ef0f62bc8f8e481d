"""Carrying a recovery out (supervisor/act.py) against a moto bucket and a recording stand-in for its
PulumiStack: what is replaced (only the faulty loose pod; the whole cluster), the order of the updates on a
protected stack, the attempt record written before the first update and rewritten after, a failed update
recorded as failed, a round killed mid-way finished by the next one without a second replace, and nothing
in the bucket deleted."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace as with_
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from common.pulumi import PulumiError
from supervisor.act import (
    CLUSTER_TYPE,
    FILES_TYPE,
    POD_TYPE,
    Recoverer,
    RecoveryError,
    replace_urns,
    replaced_ids,
)
from supervisor.faults import Attempt
from supervisor.recover import Plan
from supervisor.store import read_attempts

pytestmark = pytest.mark.services  # a moto S3 server beside the test

T0 = 1_800_000_000.0
U = "urn:pulumi:prod::trainstack::trainstack:index:H100Cluster$"
RESOURCES = [
    {"type": CLUSTER_TYPE, "urn": U + CLUSTER_TYPE + "::prod-cluster", "outputs": {"cluster_id": "c1"}},
    {"type": POD_TYPE, "urn": U + POD_TYPE + "::s-pod-0", "outputs": {"pod_id": "p0"}},
    {"type": POD_TYPE, "urn": U + POD_TYPE + "::s-pod-1", "outputs": {"pod_id": "p1"}},
    {"type": POD_TYPE, "urn": U + POD_TYPE + "::s-pod-old", "outputs": {"pod_id": "p1"}, "delete": True},
    {"type": FILES_TYPE, "urn": U + FILES_TYPE + "::prod-files-0", "outputs": {}},
    {"type": FILES_TYPE, "urn": U + FILES_TYPE + "::prod-files-1", "outputs": {}},
]


class FakeStack:
    """Records set_config and up calls; `fail_on` makes the n-th up raise like the CLI does."""

    def __init__(self, fail_on: int | None = None, kill_on: int | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail_on, self.kill_on = fail_on, kill_on

    def resources(self) -> list[Any]:
        return RESOURCES

    def set_config(self, key: str, value: str) -> None:
        self.calls.append(("set", (key, value, True)))

    def up(self, **kwargs: Any) -> Any:
        n = sum(1 for c in self.calls if c[0] == "up")
        self.calls.append(("up", {k: kwargs.get(k) for k in ("replace", "refresh")}))
        if n == self.kill_on:
            raise KeyboardInterrupt  # the supervisor killed mid-update
        if n == self.fail_on:
            raise PulumiError("`pulumi up` failed (255)", output="Updating (prod)\nerror: boom\n")
        return {"replace": 1}


@pytest.fixture
def s3(moto_s3: str) -> Any:
    return boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"recover-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="trainstack/prod/step-100.pt", Body=b"weights")
    return name


def recoverer(
    s3: Any, bucket: str, stack: FakeStack, topology: str = "cluster", protect: bool = False
) -> Recoverer:
    return Recoverer(
        "prod", Path("."), protect, topology, s3, bucket, log=lambda _l: None, select=lambda *_a: stack
    )


def test_replace_urns_pick_the_cluster_the_named_pod_or_every_nodes_files() -> None:
    replace = Plan("node_lost", "x", "replace", ("p1",))
    assert replace_urns(RESOURCES, replace, "cluster") == [U + CLUSTER_TYPE + "::prod-cluster"]
    assert replace_urns(RESOURCES, replace, "pods") == [U + POD_TYPE + "::s-pod-1"]  # not the pending delete
    restart = Plan("stalled", "x", "restart", ("p1",))
    assert replace_urns(RESOURCES, restart, "cluster") == [
        r["urn"] for r in RESOURCES if r["type"] == FILES_TYPE
    ]
    assert replace_urns(RESOURCES, Plan("gave_up", "x", "release"), "cluster") == []


def test_a_protected_cluster_is_unprotected_replaced_and_protected_again(s3: Any, bucket: str) -> None:
    stack = FakeStack()
    line = recoverer(s3, bucket, stack, protect=True).carry_out(Plan("node_unhealthy", "xid", "replace"), T0)
    assert "replace done through Pulumi (prod-cluster)" in line
    assert stack.calls == [
        ("set", ("trainstack:run.phase", "recovering", True)),
        ("up", {"replace": None, "refresh": None}),
        ("up", {"replace": [U + CLUSTER_TYPE + "::prod-cluster"], "refresh": True}),
        ("set", ("trainstack:run.phase", "active", True)),
        ("up", {"replace": None, "refresh": None}),
    ]
    [attempt] = read_attempts(s3, bucket, "prod", since=0)
    assert (attempt.kind, attempt.outcome, attempt.at) == ("node_unhealthy", "done", T0)


def test_a_cluster_plan_made_before_its_cluster_was_replaced_replaces_nothing(s3: Any, bucket: str) -> None:
    """A plan names the cluster it was made for (replaced_ids): once the stack holds another cluster, the
    same plan again (outputs read before the replace) only converges, protect untouched; the attempt is
    recorded and counted, so it stays bounded (tests/e2e/test_recovery_protected.py shows it for real)."""
    lost = Plan("node_lost", "gone", "replace")
    assert replace_urns(RESOURCES, lost, "cluster", ("cluster:c1",)) == [U + CLUSTER_TYPE + "::prod-cluster"]
    assert replace_urns(RESOURCES, lost, "cluster", ("cluster:c0",)) == []  # c0 replaced: the stack has c1
    stack = FakeStack()
    line = recoverer(s3, bucket, stack, protect=True).carry_out(lost, T0, replaced=("cluster:c0",))
    assert line == "recover: nothing left to replace; refreshed"
    assert stack.calls == [("up", {"replace": None, "refresh": True})]  # no phase change, no replace
    [attempt] = read_attempts(s3, bucket, "prod", since=0)
    assert (attempt.outcome, attempt.replaced) == ("done", ("cluster:c0",))
    again = FakeStack()
    recoverer(s3, bucket, again, protect=True).carry_out(lost, T0 + 60, replaced=("cluster:c1",))
    assert again.calls[2] == ("up", {"replace": [U + CLUSTER_TYPE + "::prod-cluster"], "refresh": True})


def test_a_loose_pod_only_that_pod_and_the_failed_data_center_last(s3: Any, bucket: str) -> None:
    stack = FakeStack()
    plan = Plan("node_lost", "gone", "replace", ("p1",), "EU-RO-1", ("US-TX-3", "EU-RO-1"), ("EU-RO-1",))
    recoverer(s3, bucket, stack, topology="pods").carry_out(plan, T0)
    assert stack.calls == [
        ("set", ("trainstack:recovery.avoid_data_centers[0]", "EU-RO-1", True)),
        ("up", {"replace": [U + POD_TYPE + "::s-pod-1"], "refresh": True}),
    ]


def test_a_failed_update_is_recorded_failed_and_raised(s3: Any, bucket: str) -> None:
    with pytest.raises(RecoveryError, match="boom"):
        recoverer(s3, bucket, FakeStack(fail_on=0)).carry_out(Plan("stalled", "x", "restart"), T0)
    [attempt] = read_attempts(s3, bucket, "prod", since=0)
    assert attempt.outcome == "failed"


def test_killed_mid_update_leaves_begun_and_the_next_round_finishes_without_replacing(
    s3: Any, bucket: str
) -> None:
    with pytest.raises(KeyboardInterrupt):
        recoverer(s3, bucket, FakeStack(kill_on=0)).carry_out(Plan("node_lost", "x", "replace"), T0)
    [begun] = read_attempts(s3, bucket, "prod", since=0)
    assert begun.outcome == "begun"  # what the next round's assess turns into a `finish` plan
    stack = FakeStack()
    plan = Plan(begun.kind, "finishing", "finish", begun.targets, begun.data_center)
    recoverer(s3, bucket, stack).carry_out(plan, T0 + 300, pending=begun)
    assert stack.calls == [("up", {"replace": None, "refresh": True})]  # converges; no second replace
    [again] = read_attempts(s3, bucket, "prod", since=0)
    assert (again.at, again.outcome) == (T0, "done")  # the same attempt, counted once
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert "trainstack/prod/step-100.pt" in keys  # nothing deleted


def test_an_attempt_record_holds_no_secret_and_round_trips(s3: Any, bucket: str) -> None:
    recoverer(s3, bucket, FakeStack()).carry_out(Plan("stalled", "no step", "restart", ("p0",)), T0)
    [obj] = s3.list_objects_v2(Bucket=bucket, Prefix="supervisor/prod/recoveries/")["Contents"]
    data = json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
    assert Attempt.from_json(data).targets == ("p0",)
    assert set(data) == {
        *("at", "kind", "targets", "data_center", "outcome", "what", "cause", "replaced", "released_at"),
        "answered",
        "trials",  # a pool's trials, each with its own budget (issue #63)
    }


def test_a_replace_records_the_billed_ids_it_removes_and_the_next_round_bills_them(
    s3: Any, bucket: str
) -> None:
    """Issue #29: RunPod bills a replaced cluster (or pod) under its own id, so the attempt keeps that id and
    every later round's billing read gets it; a restart removes nothing billed."""
    outputs = {"cluster_id": "c1", "nodes": [{"pod_id": "p0"}, {"pod_id": "p1"}]}
    lost = Plan("node_lost", "x", "replace", ("p1",))
    assert replaced_ids(outputs, lost, "cluster") == ("cluster:c1",)
    assert replaced_ids(outputs, lost, "pods") == ("pod:p1",)
    assert replaced_ids(outputs, Plan("stalled", "x", "restart", ("p1",)), "cluster") == ()
    assert replaced_ids({"nodes": []}, lost, "cluster") == ()  # no cluster id: nothing to name

    class Deleting(FakeStack):  # the engine reports the old cluster deleted, as `pulumi up --replace` does
        def up(self, **kwargs: Any) -> Any:
            meta = {"type": CLUSTER_TYPE, "op": "delete-replaced", "urn": RESOURCES[0]["urn"]}
            kwargs["on_event"]({"sequence": 7, "resOutputsEvent": {"metadata": meta}})
            return super().up(**kwargs)

    rec = recoverer(s3, bucket, Deleting())
    rec.clock = lambda: T0 + 42.0
    rec.carry_out(lost, T0, replaced=("cluster:c1",))
    [attempt] = read_attempts(s3, bucket, "prod", since=0.0)
    assert attempt.replaced == ("cluster:c1",) and attempt.outcome == "done"
    assert attempt.released_at == T0 + 42.0  # the ledger ends the old cluster's span there


def test_two_whole_rounds_find_a_lost_pod_recreate_it_through_pulumi_and_say_so(s3: Any, bucket: str) -> None:
    """Two whole rounds: an unreachable pod RunPod calls RUNNING is not lost; once RunPod says EXITED, the
    pod is replaced, with one message."""
    from supervisor.act import Actuator
    from supervisor.cli import Round
    from supervisor.observe import Sources

    outputs = {
        "nodes": [
            {"rank": 0, "ip": "10.1.0.2", "pod_id": "p0", "ssh_endpoint": "127.0.0.1:2222"},
            {"rank": 1, "ip": "10.1.0.3", "pod_id": "p1", "ssh_endpoint": "127.0.0.1:2223"},
        ],
        "cost_per_hour": 63.84,
    }
    raw = {
        "trainstack:bucket": {"value": json.dumps({"name": bucket, "region": "us-east-1"})},
        "trainstack:cluster": {"value": json.dumps({"nodes": 2, "topology": "pods"})},
        "trainstack:training": {
            "value": json.dumps({"secrets": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]})
        },
    }
    state = {
        "time": T0,
        "nodes": [
            {"node": "p0", "ok": True, "gpu_util_mean": 0.9, "step": 50},
            {"node": "p1", "ok": False, "error": "connection refused"},
        ],
    }
    sent: list[str] = []
    stack = FakeStack()
    clock = iter([T0, T0 + 300])
    p1_status = iter(["RUNNING", "EXITED"])

    class Heard(Actuator):
        def notify(self, text: str) -> str:
            sent.append(text)
            return "notify: recorded"

    def one_round() -> Any:
        now = next(clock)
        status = next(p1_status)
        return Round(
            "search",
            Path("."),
            s3=s3,
            sources=Sources(
                ssh_key=lambda: True,
                aggregator=lambda _s, _o: state,
                billing=lambda _o, **_kw: 5.0,
                s3=s3,
                pod_statuses=lambda ids: {
                    i: ("RUNNING" if i == "p0" else status, "US-TX-3", None) for i in ids
                },
                # p1 leaves no exit record; without this the round asked p1 over SSH at 127.0.0.1:2223
                # and waited out the 10 s the supervisor gives a node that does not answer, each round.
                exits=lambda _stack, _outputs, _ids: {},
            ),
            actuator=Heard("search", Path("."), protect=False, log=lambda _l: None),
            recoverer=Recoverer(
                "search", Path("."), False, "pods", s3, bucket, log=lambda _l: None, select=lambda *_a: stack
            ),
            read=lambda _w, _s: (outputs, raw),
            clock=lambda: now,
            log=lambda _l: None,
        ).run_once()

    first = one_round()
    assert first.decision.kind == "none" and stack.calls == []  # unreachable, RunPod says RUNNING: not lost
    second = one_round()
    assert second.decision.kind == "node_lost" and second.done == ("recover",), second.decision.reason
    assert stack.calls == [("up", {"replace": [U + POD_TYPE + "::s-pod-1"], "refresh": True})]
    assert len(sent) == 1 and "node 1 (p1) is EXITED" in sent[0] and "replace done through Pulumi" in sent[0]
    [attempt] = read_attempts(s3, bucket, "search", since=0)
    assert attempt.outcome == "done" and attempt.targets == ("p1",) and attempt.data_center == "US-TX-3"


def test_the_failure_cause_travels_from_the_node_to_the_decision(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    """transfer.py finish writes the cause the start script classified; the supervisor reads it back."""
    from supervisor.store import verify_run
    from train.node import transfer as node_transfer

    env = {
        "TRAINSTACK_RUN_ID": "prod.p0",
        "NODE_RANK": "0",
        "NUM_NODES": "1",
        "TRAINSTACK_PROGRESS_FILE": str(tmp_path / "none.jsonl"),
        "TRAINSTACK_FINISH_WAIT_S": "0",
        "TRAINSTACK_FAILURE": "oom",
    }
    node_transfer.finish(s3, bucket, "trainstack/prod/", 1, env)
    state = verify_run(s3, bucket, "prod.p0")
    assert (state.status, state.exit_status, state.failure) == ("failed", 1, "oom")


def test_stalled_collects_every_nodes_bundle_first_and_the_message_names_the_stopped_rank(
    s3: Any, bucket: str
) -> None:
    from supervisor.act import recover_with
    from supervisor.faults import Fleet
    from supervisor.model import Observation

    outputs = {
        "workdir": "/workspace/trainstack",
        "nodes": [
            {"rank": 0, "ip": "10.1.0.2", "pod_id": "p0", "ssh_endpoint": "127.0.0.1:2222"},
            {"rank": 1, "ip": "10.1.0.3", "pod_id": "p1", "ssh_endpoint": "127.0.0.1:2223"},
        ],
    }
    answers = {
        "p0": "node p0: 8 rank(s), none stopped: see their stacks; 9 file(s) to s3://b/run/x/diagnostics/t/p0/",
        "p1": "node p1: rank 11 (pid 4242) stopped (state T); the other 7 rank(s) wait on it; 9 file(s)",
    }
    seen: list[str] = []

    def ssh(target: Any, command: str) -> str:
        seen.append(command)
        return answers[target.alias]

    stack = FakeStack()
    rec = Recoverer(
        "prod",
        Path("."),
        False,
        "cluster",
        s3,
        bucket,
        log=lambda _l: None,
        select=lambda *_a: stack,
        ssh_run=ssh,
    )
    round_ = SimpleNamespace(recoverer=rec, stack="prod", workspace=Path("."), log=lambda _l: None)
    config = SimpleNamespace(protect=False, cluster=SimpleNamespace(topology="cluster"))
    obs = Observation(at=T0, phase="active", nodes=2, node0_reachable=True, fleet=Fleet("cluster", (), ()))
    line = recover_with(round_, config, outputs, obs, Plan("stalled", "no step", "restart"), s3, bucket, None)
    assert len(seen) == 2 and all("train.node.diagnostics collect" in c and "--env-of" in c for c in seen)
    assert "node 1: node p1: rank 11 (pid 4242) stopped" in line
    assert line.index("diagnostics:") < line.index("recover: restart done")  # the bundle before the restart
    assert stack.calls == [
        ("up", {"replace": [r["urn"] for r in RESOURCES if r["type"] == FILES_TYPE], "refresh": False})
    ]


@pytest.mark.parametrize("with_bucket", [True, False], ids=["bucket", "no bucket: the local memory"])
def test_a_fault_that_always_comes_back_gives_up_after_max_recoveries_releases_and_says_so_once(
    s3: Any, bucket: str, tmp_path: Path, with_bucket: bool
) -> None:
    """Whole rounds, 5 min apart: an XID on node 1 that every recreated cluster shows again. Three
    recoveries through Pulumi (each after its backoff), then "gave up": a last sync, the release, one message
    saying why. Without a bucket too (issue #42: no attempt was recorded, and the pod was replaced every
    round): the records are kept in the supervisor's local memory."""
    from supervisor.act import Actuator
    from supervisor.cli import Round
    from supervisor.localstore import LOCAL_BUCKET, DirObjects
    from supervisor.observe import Sources

    memory = DirObjects(tmp_path / "memory")
    store_of = (s3, bucket) if with_bucket else (memory, LOCAL_BUCKET)

    outputs = {
        "nodes": [
            {"rank": 0, "ip": "10.1.0.2", "pod_id": "p0", "ssh_endpoint": "127.0.0.1:2222"},
            {"rank": 1, "ip": "10.1.0.3", "pod_id": "p1", "ssh_endpoint": "127.0.0.1:2223"},
        ],
        "cost_per_hour": 63.84,
    }
    raw = {
        "trainstack:bucket": {"value": json.dumps({"name": bucket, "region": "us-east-1"})},
        "trainstack:cluster": {
            "value": json.dumps({"nodes": 2, "topology": "cluster", "data_centers": ["US-TX-3"]})
        },
        "trainstack:training": {
            "value": json.dumps(
                {"secrets": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"], "nccl_min_busbw_gb_per_s": 300}
            )
        },
        "trainstack:recovery": {"value": json.dumps({"max_recoveries": 3, "backoff_min": 10})},
    }
    if not with_bucket:
        del raw["trainstack:bucket"]
    step = iter(range(100, 100_000, 10))

    def state() -> dict[str, Any]:
        s = next(step)  # training goes on between recoveries: only the XID is wrong
        return {
            "time": T0,
            "nodes": [
                {"node": "p0", "ok": True, "gpu_util_mean": 0.9, "step": s},
                {"node": "p1", "ok": True, "gpu_util_mean": 0.9, "step": s},
            ],
            "firing": [{"rule": "gpu_xid", "node": "p1", "severity": "critical", "summary": "XID 79"}],
        }

    sent: list[str] = []
    effects: list[str] = []
    stack = FakeStack()

    class Heard(Actuator):
        def notify(self, text: str) -> str:
            sent.append(text)
            return "notify: recorded"

        def sync(self, _outputs: Any) -> str:
            effects.append("sync")
            return "sync: recorded"

        def release(self) -> str:
            effects.append("release")
            return "release: recorded"

    rounds = []
    for i in range(40):  # 200 min: room for three backoffs (10, 20, 40 min) and more
        now = T0 + 300 * i
        rec = recoverer(s3, bucket, stack)
        if not with_bucket:
            rec = with_(rec, s3=None, bucket=None, memory=store_of)
        record = Round(
            "prod",
            Path("."),
            s3=s3 if with_bucket else None,
            memory=memory,
            sources=Sources(
                ssh_key=lambda: True,
                aggregator=lambda _s, _o: state(),
                billing=lambda _o, **_kw: 5.0,
                s3=s3 if with_bucket else None,
                pod_statuses=lambda ids: {i: ("RUNNING", "US-TX-3", None) for i in ids},
            ),
            actuator=Heard("prod", Path("."), protect=False, log=lambda _l: None),
            recoverer=rec,
            read=lambda _w, _s: (outputs, raw),
            clock=lambda now=now: now,
            log=lambda _l: None,
        ).run_once()
        rounds.append((record.decision.kind, record.done))
        if "release" in record.done:
            break
    acted = [r for r in rounds if r[1]]
    assert acted == [("node_unhealthy", ("recover",))] * 3 + [("gave_up", ("sync", "release"))], rounds
    assert [c for c in stack.calls if c[0] == "up"] == [
        ("up", {"replace": [U + CLUSTER_TYPE + "::prod-cluster"], "refresh": True})
    ] * 3
    assert effects == ["sync", "release"]
    gave_up = [t for t in sent if "gave up" in t]
    assert len(gave_up) == 1 and "after 3 recoveries" in gave_up[0] and "gpu_xid" in gave_up[0], sent
    assert len(sent) == 3 + 1  # one message per recovery, one for the release; nothing repeated
    attempts = read_attempts(*store_of, "prod", since=0)
    assert [a.outcome for a in attempts] == ["done"] * 3
