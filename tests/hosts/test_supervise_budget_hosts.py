"""Over budget (issue #28), on the local RunPod with emulated hosts: a one-pod stack with a low run cap trains
(for longer than the test lasts), its billing runs on the emulator's clock, which the test moves forward; at
`warn_at` of the cap one round sends one warning, and the round whose next interval would reach the cap
syncs the newest checkpoint (SIGTERM to the start script, whose own path uploads it) and releases the
compute through a Pulumi update. Nothing here waits on real time: rounds run when the test says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.webhook import Receiver
from supervisor.cli import Round
from tests.hosts.conftest import HOSTS_NET, HostsEnv
from tests.hosts.test_local_cluster import BUCKET, STACK, Cluster
from tests.polling import poll

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.root,
    pytest.mark.allow_hosts(["127.0.0.1", "::1", "localhost", HOSTS_NET]),
]

CAP_USD = 40.0  # one 8-GPU pod of local-cpu bills ~$32/h: one max_run_hours (1 h) fits, 1.25 h does not


@pytest.fixture(scope="module")
def node_env_overrides() -> dict[str, str]:
    # A run far longer than the test (100,000 steps at 0.05 s): it never finishes on its own here.
    return {"TRAINSTACK_STEPS": "100000", "TRAINSTACK_STEP_SLEEP_S": "0.05"}


def test_over_budget_warns_at_warn_at_then_syncs_and_releases_at_the_cap(
    hosts_env: HostsEnv, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(hosts_env, tmp_path, nodes=1)
    cluster.config("trainstack:cluster.topology", "pods", path=True)
    cluster.config("trainstack:delivery_enabled", "true")
    cluster.config("trainstack:run", json.dumps({"max_cost_usd": CAP_USD}))
    # #28's budget rule alone: no idle episode (the emulator's clock runs ahead of the node's aggregator)
    # and no recovery (issue #29) in the way.
    cluster.config("trainstack:supervisor", json.dumps({"idle_for_min": 600}))
    cluster.config("trainstack:recovery", json.dumps({"enabled": False}))
    try:
        _warn_then_release(cluster, hosts_env, receiver, monkeypatch)
    finally:
        if cluster.s3.list_buckets()["Buckets"]:
            cluster.empty_bucket()
        cluster.cli.run("destroy", "--yes", "--stack", STACK, check=False)


def _warn_then_release(
    cluster: Cluster, env: HostsEnv, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.up()
    pod = cluster.outputs()["nodes"][0]["pod_id"]
    poll(lambda: "first step" in cluster.log(0, pod), "training under way", 360, log=cluster.logs)
    for name, value in cluster.cli.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ALERT_WEBHOOK_URL", receiver.url)
    sup = Round(STACK, cluster.cli.project, s3=cluster.s3, clock=env.runpod.admin.now)

    first = sup.run_once()  # minutes into the run: far from the cap
    spent, rate = first.observation.spent_usd, first.observation.usd_per_hour
    # Nothing to do: `none`, or on a loaded machine the first reading of an idle episode, before the node's
    # first GPU reading is in (no action: idle_for_min is 600 here; seen once beside two busy loops).
    assert first.decision.kind in ("none", "idle") and first.done == (), first.decision
    assert spent is not None and 0 <= spent < 0.8 * CAP_USD and rate > 0

    # Forward on the emulator's clock to 85 % of the cap: one warning, nothing else.
    env.runpod.admin.advance((0.85 * CAP_USD - spent) / rate * 3600)
    warned = sup.run_once()
    assert (warned.decision.kind, warned.done) == ("over_budget", ("notify",)), warned.decision
    assert 0.8 * CAP_USD <= (warned.observation.spent_usd or 0) < CAP_USD
    assert len(env.runpod.admin.live()["pods"]) == 1

    # Into the last interval before the cap: the newest checkpoint is synced, then the release.
    synced_before = sorted(o["Key"] for o in cluster.s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))
    to_cap = CAP_USD - rate * 2.5 / 60 - (warned.observation.spent_usd or 0)
    env.runpod.admin.advance(max(0.0, to_cap) / rate * 3600)
    released = sup.run_once()
    assert (released.decision.kind, released.done) == (
        "over_budget",
        ("sync", "release", "summary"),
    ), (released.decision, released.errors)
    assert released.observation.spent_usd is not None and released.observation.spent_usd < CAP_USD
    live = env.runpod.admin.live()
    assert live["pods"] == [] and len(live["volumes"]) == 1 and cluster.outputs()["nodes"] == []
    # The last sync: SIGTERM reached the start script, which stopped training and uploaded the newest one.
    log = cluster.log(0, pod)
    assert "SIGTERM: stopping training" in log, log[-3000:]
    after = sorted(o["Key"] for o in cluster.s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))
    assert [k for k in after if k.endswith(".pt")], after
    assert set(synced_before) <= set(after)  # nothing deleted

    warnings = [t for t in receiver.texts if "compute is released at the cap" in t]
    assert len(warnings) == 1 and f"${CAP_USD:,.2f} cap" in warnings[0], receiver.texts
    assert sum("released compute" in t for t in receiver.texts) == 1, receiver.texts
    assert sum("run ended" in t for t in receiver.texts) == 1, receiver.texts
    # The next round: nothing is up, nothing bills but storage, nothing to do.
    after_round = sup.run_once()
    assert (after_round.decision.kind, after_round.done) == ("none", ()), after_round.decision
