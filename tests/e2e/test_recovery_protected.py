"""A protected Instant Cluster recovered through Pulumi for real (issue #29): prod as it ships
(`trainstack:protect: true`), made a 2-node cluster, on the local RunPod + moto. One member's host dies out of
band; the supervisor's observation (RunPod's listing), its pure decision and the round's recover action
(`recover_with`, what `Round._act` calls) lift `protect` from the compute alone (phase `recovering`), replace
the cluster delete-before-create and set the phase back to `active` (protect on again), with the real Pulumi
CLI. The same plan again replaces nothing. Then a round killed right after it lifted protect, with another
member lost: the next round's `finish` converges (its refresh sees the lost member, so its update replaces the
cluster, delete first) and puts protect back. Control plane only (no emulated hosts, not root): the
nodes' training across the resume is the fault storm's (tests/hosts/test_storm.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from harness.local import LocalRunPod
from stackconfig.config import StackConfig
from stackconfig.loader import load_stack_config
from supervisor.act import CLUSTER_TYPE, Actuator, Recoverer, recover_with
from supervisor.decide import Policy, decide
from supervisor.faults import Attempt, fleet_of, pod_statuses
from supervisor.model import Observation
from supervisor.recover import assess
from supervisor.store import read_attempts
from tests.e2e.reliability import duplicates, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e
STACK = "prod"
VOLUME = "pulumi-python:dynamic/runpod:NetworkVolume"
BUCKET = "pulumi-python:dynamic/s3:CheckpointBucket"


def _set(run: StackRun, key: str, value: str) -> None:
    run.cli.run("config", "set", "--path", "--stack", STACK, key, value)


def _state(run: StackRun) -> dict[str, Any]:
    """One `pulumi stack export`: the stack's outputs and its resources by type (pending deletes left out)."""
    resources = [r for r in run.cli.resources() if not r.get("delete")]
    root = next(r for r in resources if r["type"] == "pulumi:pulumi:Stack")
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in resources:
        by_type.setdefault(r["type"], []).append(r)
    return {"outputs": root.get("outputs") or {}, "by_type": by_type}


def _one(state: dict[str, Any], kind: str) -> dict[str, Any]:
    [res] = state["by_type"].get(kind) or [{}]
    assert res, f"no {kind} in the stack: {sorted(state['by_type'])}"
    return res


def _plain(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource's outputs but the dynamic provider's own secret (re-encrypted, fresh nonce, by every up)."""
    return {k: v for k, v in (resource.get("outputs") or {}).items() if k != "__provider"}


def _config(run: StackRun) -> StackConfig:
    return load_stack_config(
        {k: v for k, v in run.config().items() if not k.startswith("trainstack:secrets.")}
    )


def _observe(run: StackRun, outputs: dict[str, Any], at: float, attempts: list[Attempt]) -> Observation:
    """What a round sees of the nodes: RunPod's own listing (the real client), and the agents of the nodes it
    still lists answering: a host that died answers no agent either, the second signal a replace needs
    (issue #63: two signals before anything destructive)."""
    nodes = outputs["nodes"]
    statuses = pod_statuses([n["pod_id"] for n in nodes])
    views = [
        SimpleNamespace(
            rank=n["rank"],
            pod_id=n["pod_id"],
            reachable=statuses[n["pod_id"]][0] == "RUNNING",
            step=10.0,
            step_time_s=1.0,
            alerts=(),
        )
        for n in nodes
    ]
    return Observation(
        at=at,
        phase=str((run.config().get("trainstack:run") or {}).get("phase", "active")),
        nodes=len(nodes),
        node0_reachable=True,
        step=10.0,
        spent_usd=1.0,
        usd_per_hour=127.68,
        gpu_util_max=0.95,
        fleet=fleet_of("cluster", ("US-TX-3",), views, statuses, attempts=attempts),
    )


def _live_clusters(audit: list[dict[str, Any]]) -> int:
    """The most clusters alive at once over the audit entries (each create +1, each delete -1)."""
    alive = peak = 0
    for e in audit:
        if e["kind"] == "cluster" and e["event"] in ("cluster.create", "cluster.delete"):
            alive += 1 if e["event"] == "cluster.create" else -1
            peak = max(peak, alive)
    return peak


class KilledAfterUnprotect:
    """The stack (supervisor/act.py's PulumiStack) of a round killed (SIGKILL: nothing after it runs) as
    its replace began, right after phase `recovering` was applied: the first `up` with `replace=` never
    returns."""

    def __init__(self, stack: Any) -> None:
        self._stack = stack

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stack, name)

    def up(self, **kwargs: Any) -> Any:
        if kwargs.get("replace"):
            raise KeyboardInterrupt  # not an Exception: carry_out records nothing after it, as a kill
        return self._stack.up(**kwargs)


@pytest.fixture
def env(
    runpod: LocalRunPod, moto_s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StackRun]:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack(STACK, tmp_path, runpod, moto_s3)
    for key, value in run.cli.env().items():  # the supervisor runs pulumi with this process's env
        monkeypatch.setenv(key, value)
    run.cli.run("config", "set", "--stack", STACK, "trainstack:protect", "true")  # as prod ships
    _set(run, "trainstack:cluster.nodes", "2")
    yield run


def test_a_protected_cluster_is_replaced_through_pulumi_and_protected_again(
    env: StackRun, runpod: LocalRunPod, moto_s3: str
) -> None:
    run = env
    run.up()
    before = _state(run)
    old_cluster = _one(before, CLUSTER_TYPE)
    assert old_cluster.get("protect") is True, "prod's cluster is not protected: nothing to prove"
    old_id = before["outputs"]["cluster_id"]
    volume, bucket = _one(before, VOLUME), _one(before, BUCKET)
    assert volume.get("protect") is True and bucket.get("protect") is True

    config = _config(run)
    assert config.protect and config.cluster.topology == "cluster" and config.cluster.nodes == 2
    policy = Policy(recovery=config.recovery)
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    # The stack's bucket refuses plain HTTP (tls_only) and this moto serves HTTP: the supervisor's records go
    # to a bucket of their own here (tests/e2e/test_recovery.py does the same).
    records = f"recovery-records-{time.time_ns()}"
    s3.create_bucket(Bucket=records)
    lines: list[str] = []
    round_ = SimpleNamespace(
        stack=STACK, workspace=run.cli.project, log=lines.append, clock=time.time, recoverer=None
    )
    actor = Actuator(STACK, run.cli.project, protect=True, log=lines.append)  # its policy pack arguments

    members = [n["pod_id"] for n in before["outputs"]["nodes"]]
    runpod.admin.out_of_band(members[-1])  # a host died: RunPod lists that member no more
    t0 = time.time()
    obs = _observe(run, before["outputs"], t0, [])
    decision = decide(obs, [], policy)
    assert decision.kind == "node_lost" and decision.actions == ("recover",), decision.reason
    plan = assess(obs, [], policy)
    assert plan is not None and plan.act == "replace", plan

    seq = max((e["seq"] for e in runpod.admin.audit()), default=0)
    try:
        done = recover_with(round_, config, before["outputs"], obs, plan, s3, records, actor)
    except BaseException:
        print("\n".join(lines))
        raise
    said = "\n".join(lines)
    assert "replace done through Pulumi (prod-cluster)" in done, said
    after = _state(run)
    new_id = after["outputs"]["cluster_id"]
    assert new_id and new_id != old_id
    assert _one(after, CLUSTER_TYPE).get("protect") is True, "protect not back on the compute"
    assert (run.config().get("trainstack:run") or {}).get("phase") == "active"
    # The volume and the bucket: the same resources, the same outputs, still protected; RunPod agrees.
    for kind, was in ((VOLUME, volume), (BUCKET, bucket)):
        now = _one(after, kind)
        assert (now["id"], _plain(now), now.get("protect")) == (was["id"], _plain(was), True), kind
    assert [v["id"] for v in runpod.admin.live()["volumes"]] == [volume["outputs"]["volume_id"]]
    assert bucket["id"] in {b["Name"] for b in s3.list_buckets()["Buckets"]}

    # RunPod's audit: the old cluster deleted before the new one was created; never two billing at once.
    audit = runpod.admin.audit(since=seq)
    events = [(e["event"], e["resourceId"]) for e in audit if e["kind"] in ("cluster", "volume")]
    assert [e for e in events if e[0].startswith("cluster.")] == [
        ("cluster.delete", old_id),
        ("cluster.create", new_id),
    ], events
    assert not any(e[0].startswith("volume.") for e in events), events
    assert _live_clusters(runpod.admin.audit()) == 1
    posts = runpod.admin.counters()["endpoints"]["POST /v2/clusters"].get("201")
    assert posts == 2, posts  # the first up's and the replace's

    [attempt] = read_attempts(s3, records, STACK, since=0)
    assert (attempt.kind, attempt.outcome) == ("node_lost", "done")
    assert attempt.replaced == (f"cluster:{old_id}",) and attempt.released_at is not None

    # Three updates, in order: protect lifted from the compute alone, the replace, protect back.
    ups = [line for line in lines if line.startswith("recover: pulumi up")]
    assert ups == [
        "recover: pulumi up (trainstack:run.phase=recovering)",
        "recover: pulumi up (replacing 1)",
        "recover: pulumi up (trainstack:run.phase=active)",
    ], said
    applied = [line for line in lines if " applied (" in line]
    assert len(applied) == 3 and "'replace': 1" in applied[1], said
    assert not any("'delete'" in a or "'create'" in a or "'update'" in a for a in applied), applied

    # The same plan again: a round that read the stack's outputs from before the replace (after the backoff,
    # so it acts) sees the old cluster's members gone, decides node_lost for the old cluster, and carries it
    # out: the plan names that cluster, so it only converges (protect stays on), and nothing is created.
    attempts = read_attempts(s3, records, STACK, since=0)
    stale = _observe(run, before["outputs"], t0 + 3600, attempts)
    plan_again = assess(stale, [], policy)
    assert plan_again is not None and plan_again.act == "replace", plan_again
    seq = max(e["seq"] for e in runpod.admin.audit())
    lines.clear()
    again = recover_with(round_, config, before["outputs"], stale, plan_again, s3, records, actor)
    assert again == "recover: nothing left to replace; refreshed", "\n".join(lines)
    assert not any(line.startswith("recover: pulumi up (trainstack:run.phase") for line in lines), lines
    assert [e for e in runpod.admin.audit(since=seq) if e["kind"] in ("cluster", "pod")] == []
    attempts = read_attempts(s3, records, STACK, since=0)
    assert [(a.outcome, a.replaced) for a in attempts] == [("done", (f"cluster:{old_id}",))] * 2
    assert attempts[0].released_at is not None  # the first record, the bill's, kept whole
    # And a round that reads the outputs as they are now finds nothing to do: the new cluster is whole.
    assert assess(_observe(run, after["outputs"], t0 + 3600, attempts), [], policy) is None

    # A round killed right after it lifted protect (phase `recovering` applied, the replace not begun).
    members = [n["pod_id"] for n in after["outputs"]["nodes"]]
    runpod.admin.out_of_band(members[0])
    obs2 = _observe(run, after["outputs"], t0 + 7200, attempts)  # past the backoff after two attempts
    plan2 = assess(obs2, [], policy)
    assert plan2 is not None and plan2.act == "replace", plan2
    lines.clear()
    killed = Recoverer(
        STACK,
        run.cli.project,
        protect=True,
        topology="cluster",
        s3=s3,
        bucket=records,
        log=lines.append,
        up_options=actor._policy(),
        select=lambda stack, ws: KilledAfterUnprotect(_select(stack, ws)),
    )
    with pytest.raises(KeyboardInterrupt):
        recover_with(
            SimpleNamespace(**{**round_.__dict__, "recoverer": killed}),
            config,
            after["outputs"],
            obs2,
            plan2,
            s3,
            records,
            actor,
        )
    assert (run.config().get("trainstack:run") or {}).get("phase") == "recovering"
    assert not _one(_state(run), CLUSTER_TYPE).get("protect")  # what the kill left: protect lifted
    attempts = read_attempts(s3, records, STACK, since=0)
    assert [a.outcome for a in attempts] == ["done", "done", "begun"]

    # The next round: the `begun` record makes it a `finish`, which converges and puts protect back.
    obs3 = _observe(run, after["outputs"], t0 + 7500, attempts)
    plan3 = assess(obs3, [], policy)
    assert plan3 is not None and plan3.act == "finish", plan3
    lines.clear()
    seq = max(e["seq"] for e in runpod.admin.audit())
    finished = recover_with(round_, config, after["outputs"], obs3, plan3, s3, records, actor)
    assert "phase active" in finished, "\n".join(lines)
    last = _state(run)
    assert _one(last, CLUSTER_TYPE).get("protect") is True, "protect not back after the finish"
    assert (run.config().get("trainstack:run") or {}).get("phase") == "active"
    assert [a.outcome for a in read_attempts(s3, records, STACK, since=0)] == ["done"] * 3
    # The refresh reads the lost member, so the finish's update replaces the cluster (delete first) itself.
    third = last["outputs"]["cluster_id"]
    assert [
        (e["event"], e["resourceId"]) for e in runpod.admin.audit(since=seq) if e["kind"] == "cluster"
    ] == [
        ("cluster.delete", new_id),
        ("cluster.create", third),
    ]
    assert _live_clusters(runpod.admin.audit()) == 1
    assert _one(last, VOLUME)["id"] == volume["id"] and _one(last, BUCKET)["id"] == bucket["id"]
    assert orphans(run) == [] and duplicates(runpod) == []


def _select(stack: str, workspace: Path) -> Any:
    from supervisor.act import select_stack

    return select_stack(stack, workspace)
