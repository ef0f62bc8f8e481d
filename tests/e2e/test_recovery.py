"""Recovery through Pulumi for real (issue #29): the `search` pool on the local RunPod, one pod stopped out of
band; the supervisor's observation (RunPod's pod listing), its pure decision and its actuator (the Pulumi
CLI through common/pulumi.py, on the stack's own workspace) replace only that pod, in one update; 0
orphans, 0 duplicates, the other pods untouched, and a second round finds nothing to do. Control plane only
(no emulated hosts): the fault-storm with training across the resume is not this test (docs/RECOVERY.md,
"Not yet")."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

from harness.local import LocalRunPod
from stackconfig.loader import load_stack_config
from supervisor.act import Recoverer
from supervisor.decide import Policy, decide
from supervisor.faults import fleet_of, pod_statuses
from supervisor.model import Observation
from supervisor.recover import assess
from supervisor.store import read_attempts
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
POD = "pulumi-python:dynamic/runpod:Pod"


def _pods(run: object) -> dict[str, str]:
    return {
        r["urn"].rsplit("::", 1)[1]: r["outputs"]["pod_id"] for r in run.cli.resources() if r["type"] == POD
    }  # type: ignore[attr-defined]


def _observe(run: object, config: object, at: float) -> Observation:
    nodes = run.outputs()["nodes"]  # type: ignore[attr-defined]
    views = [
        SimpleNamespace(
            rank=n["rank"], pod_id=n["pod_id"], reachable=True, step=10.0, step_time_s=1.0, alerts=()
        )
        for n in nodes
    ]
    statuses = pod_statuses([n["pod_id"] for n in nodes])  # the real client against the local RunPod
    fleet = fleet_of("pods", (), views, statuses, spot=False)
    return Observation(
        at=at,
        phase="active",
        nodes=len(nodes),
        node0_reachable=True,
        step=10.0,
        spent_usd=1.0,
        usd_per_hour=127.68,
        gpu_util_max=0.95,  # training nodes: busy GPUs (unknown utilisation alone reads as idle-to-watch)
        fleet=fleet,
    )


def test_a_lost_pool_pod_is_recreated_alone_through_pulumi(
    tmp_path: Path, local_runpod: LocalRunPod, moto_s3: str, report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = open_stack("search", tmp_path, local_runpod, moto_s3)
    for key, value in run.cli.env().items():  # the supervisor runs pulumi with this process's env
        monkeypatch.setenv(key, value)
    run.up()
    before = _pods(run)
    victim = before["search-pod-1"]
    local_runpod.admin.out_of_band(victim, "EXITED")

    config = load_stack_config(
        {k: v for k, v in run.config().items() if not k.startswith("trainstack:secrets.")}
    )
    policy = Policy(recovery=config.recovery)
    obs = _observe(run, config, time.time())
    decision = decide(obs, [], policy)
    assert decision.kind == "node_lost" and decision.actions == ("recover",), decision.reason
    plan = assess(obs, [], policy)
    assert plan is not None and plan.targets == (victim,)

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    # The stack's bucket refuses plain HTTP (tls_only) and this moto serves HTTP: the supervisor's records go
    # to a bucket of their own here (tests/supervisor/ write them to a bucket as the stack would).
    records = f"recovery-records-{time.time_ns()}"
    s3.create_bucket(Bucket=records)
    lines: list[str] = []
    recoverer = Recoverer(
        "search",
        run.cli.project,
        False,
        "pods",
        s3,
        records,
        log=lines.append,
        up_options={
            "policy_packs": [str(REPO / "policy")],
            "policy_pack_configs": [str(REPO / "policy/config/search.json")],
        },
    )
    seq = max((e["seq"] for e in local_runpod.admin.audit()), default=0)
    try:
        done = recoverer.carry_out(plan, obs.at)
    except Exception:
        print("\n".join(lines))
        raise
    assert "replace done through Pulumi (search-pod-1)" in done, "\n".join(lines)

    after = _pods(run)
    assert after["search-pod-1"] != victim
    # Deleted before its replacement was created (a forced replace asks no diff: the resource option does).
    audit = local_runpod.admin.audit(since=seq)
    events = [(e["event"], e["resourceId"]) for e in audit if e["kind"] == "pod"]
    created = events.index(("pod.create", after["search-pod-1"]))
    assert any(e == "pod.delete" and rid == victim for e, rid in events[:created]), events
    assert {k: v for k, v in after.items() if k != "search-pod-1"} == {
        k: v for k, v in before.items() if k != "search-pod-1"
    }
    [attempt] = read_attempts(s3, records, "search", since=0)
    assert attempt.outcome == "done" and attempt.targets == (victim,)
    again = _observe(run, config, obs.at + 3600)  # after the backoff: nothing is faulty any more
    assert decide(again, [], Policy(recovery=config.recovery)).kind == "none"
    orphaned, duplicated = orphans(run), duplicates(local_runpod)
    report.record(
        "recovery: a pool pod stopped out of band, the supervisor's decision and Pulumi replace",
        "node_lost decided from RunPod's listing; only that pod replaced, in one update; the next round idle",
        orphaned,
        duplicated,
    )
    assert orphaned == [] and duplicated == []
    run.destroy()
    assert orphans(run) == []


def test_the_members_of_a_healthy_instant_cluster_read_running_not_gone(
    local_runpod: LocalRunPod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RunPod's `GET /v2/pods` leaves cluster members out unless asked (includeClusterPods): the supervisor's
    status listing asks, so a healthy cluster's nodes are RUNNING, and only a member really gone is gone."""
    from tests.emulator.conftest import cluster_body
    from tests.polling import poll

    for key, value in local_runpod.env().items():
        monkeypatch.setenv(key, value)
    with local_runpod.client() as api:
        cluster = api.post("/v2/clusters", json=cluster_body("recovery-statuses")).json()
        try:
            members = [p["id"] for p in api.get(f"/v2/clusters/{cluster['id']}/pods").json()["pods"]]
            assert len(members) >= 2
            statuses = poll(
                lambda: (s := pod_statuses(members)) and all(v[0] == "RUNNING" for v in s.values()) and s,
                "the members RUNNING in the supervisor's listing",
                30,
            )
            assert {v[1] for v in statuses.values()} != {None}  # the listing's data center, not the default
            local_runpod.admin.out_of_band(members[-1])  # a host died: that member, and only it, is gone
            after = pod_statuses(members)
            assert after[members[-1]][0] == "ABSENT"  # left out of the listing: a signal, not yet a verdict
            assert all(after[m][0] == "RUNNING" for m in members[:-1]), after
        finally:  # the local RunPod is shared by the module's tests (and tests/emulator's): leave it empty
            api.delete(f"/v2/clusters/{cluster['id']}")
