"""`trainstack:supervisor` and `trainstack:run`: key-path errors, the one run cap, the released phase."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.alerts import stack_alert_rules
from components.cluster import H100Cluster, H100ClusterArgs
from components.render import render_start_script, stack_run_ids
from forecast.stack import stack_forecast
from stackconfig.config import ConfigError
from stackconfig.derived import cap_notice, run_cost_cap
from stackconfig.loader import load_stack_config
from stackconfig.supervisor import RunConfig, SupervisorConfig
from tests.components.conftest import fake_nodes, stack_config
from tests.components.test_cluster import BUCKET, CLUSTER, POD, SECRET, SECRET_VALUES, VOLUME, FakeProviders

CLUSTER_2 = {"topology": "cluster", "nodes": 2, "gpus_per_node": 8, "data_centers": ["US-TX-3"]}
BUSBW = {"nccl_min_busbw_gb_per_s": 100}


def test_defaults_are_the_issues() -> None:
    s = load_stack_config({}).supervisor
    assert (s.enabled, s.dry_run, s.interval_min, s.idle_util_pct, s.idle_for_min, s.idle_grace_min) == (
        True, False, 5.0, None, None, None,
    )  # fmt: skip
    # None for the idle three: the idle rule's own defaults (supervisor/rules/idle.py, test_rooms.py)
    assert (s.warn_at, s.blind_for_min, s.release_mode) == (0.8, 15.0, "delete")
    assert s.boot_timeout_min == 30.0  # issue #42: a cold image pull and the health checks (SUPERVISOR.md)
    assert load_stack_config({}).run == RunConfig(phase="active", max_cost_usd=0.0)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"supervisor": {"interval_min": 0}}, "trainstack:supervisor.interval_min"),
        ({"supervisor": {"boot_timeout_min": 0}}, "trainstack:supervisor.boot_timeout_min"),
        ({"supervisor": {"idle_util_pct": 150}}, "trainstack:supervisor.idle_util_pct"),
        ({"supervisor": {"warn_at": 1.5}}, "trainstack:supervisor.warn_at"),
        ({"supervisor": {"enabled": "yes"}}, "trainstack:supervisor.enabled"),
        ({"supervisor": {"release_mode": "pause"}}, "trainstack:supervisor.release_mode"),
        # An Instant Cluster cannot be stopped
        (
            {"supervisor": {"release_mode": "stop"}, "cluster": CLUSTER_2, "training": BUSBW},
            "trainstack:supervisor.release_mode",
        ),
        ({"supervisor": {"idel_for_min": 3}}, "trainstack:supervisor.idel_for_min"),
        ({"supervisor": '{"interval_min": '}, "trainstack:supervisor"),
        ({"run": {"phase": "paused"}}, "trainstack:run.phase"),
        ({"run": {"max_cost_usd": -1}}, "trainstack:run.max_cost_usd"),
    ],
)
def test_bad_values_name_their_key_path(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw)
    assert [p.path for p in err.value.problems] == [path]


def test_release_mode_stop_is_refused_for_a_cluster_naming_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        load_stack_config({"supervisor": {"release_mode": "stop"}, "cluster": CLUSTER_2, "training": BUSBW})
    assert "Instant Cluster cannot be stopped" in str(err.value) and "release_mode: delete" in str(err.value)
    spot = {"topology": "pods", "nodes": 1, "capacity": "spot", "bid_per_gpu": 2.0}
    with pytest.raises(ConfigError) as err:
        load_stack_config({"supervisor": {"release_mode": "stop"}, "cluster": spot})
    mine = [p for p in err.value.problems if p.path == "trainstack:supervisor.release_mode"]
    assert len(mine) == 1 and "capacity 'on_demand'" in str(mine[0]), err.value.problems
    pods = {"topology": "pods", "nodes": 2, "gpus_per_node": 8, "capacity": "on_demand"}
    ok = load_stack_config({"supervisor": {"release_mode": "stop"}, "cluster": pods})
    assert ok.supervisor.release_mode == "stop"


def test_a_new_boot_of_the_same_pod_is_a_new_run() -> None:
    assert stack_run_ids("dev", "pods", ["p0", "p1"]) == ["dev-pod-0.p0", "dev-pod-1.p1"]
    assert stack_run_ids("dev", "pods", ["p0", "p1"], [2, 0]) == ["dev-pod-0.p0.b2", "dev-pod-1.p1"]
    config = stack_config("dev")
    restarted = [n.__class__(**{**n.__dict__, "boot": 1}) for n in fake_nodes(config)]
    script = render_start_script("dev", config, restarted, 0)
    expected = stack_run_ids("dev", "pods", [n.pod_id for n in restarted], [1] * len(restarted))[0]
    assert expected.endswith(".b1") and f"TRAINSTACK_RUN_ID=${{TRAINSTACK_RUN_ID:-{expected}}}" in script


def test_one_run_cap_old_alerts_key_still_works_with_a_notice() -> None:
    old = load_stack_config({"alerts": {"budget_usd": 900.0}})
    assert run_cost_cap(old) == 900.0 and stack_alert_rules(old, stack_forecast(old)).budget_usd == 900.0
    assert "trainstack:run.max_cost_usd" in (cap_notice(old) or "")
    new = load_stack_config({"run": {"max_cost_usd": 500.0}, "alerts": {"budget_usd": 900.0}})
    assert run_cost_cap(new) == 500.0 and stack_alert_rules(new, stack_forecast(new)).budget_usd == 500.0
    assert "ignored" in (cap_notice(new) or "")
    assert cap_notice(load_stack_config({"run": {"max_cost_usd": 500.0}})) is None


@pytest.mark.parametrize("name", ["dev", "search", "prod"])
def test_rendered_run_id_is_the_one_the_supervisor_looks_for(name: str) -> None:
    config = stack_config(name)
    nodes = fake_nodes(config)
    ids = stack_run_ids(name, config.cluster.topology, [n.pod_id for n in nodes])
    for n in nodes:
        script = render_start_script(name, config, nodes, n.rank)
        expected = ids[0] if config.cluster.topology == "cluster" else ids[n.rank]
        assert f"TRAINSTACK_RUN_ID=${{TRAINSTACK_RUN_ID:-{expected}}}" in script


def _with_phase(name: str, phase: str, mode: str = "delete") -> H100Cluster:
    config = stack_config(name)
    supervisor = config.supervisor.model_copy(update={"release_mode": mode})
    config = config.model_copy(update={"run": RunConfig(phase=phase), "supervisor": supervisor})  # type: ignore[arg-type]
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    return H100Cluster(name, H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))


@pytest.fixture
def fake() -> FakeProviders:
    mocks = FakeProviders()
    pulumi.runtime.set_mocks(mocks, preview=False)
    return mocks


@pulumi.runtime.test
def test_released_prod_declares_no_compute_but_keeps_volume_and_bucket(
    fake: FakeProviders,
) -> pulumi.Output[None]:
    cluster = _with_phase("prod", "released")

    def check(out: list[Any]) -> None:
        nodes, hostfile, _per_hour = out
        kinds = {r.typ for r in fake.resources}
        assert CLUSTER not in kinds and POD not in kinds
        assert {VOLUME, BUCKET} <= kinds
        # no secret is kept anywhere: RunPod holds none, and the nodes' files went with the nodes (#67)
        assert SECRET not in kinds and "pulumi-python:dynamic/delivery:SecretsFile" not in kinds
        assert nodes == [] and hostfile == ""

    # cost_per_hour waits for the volume, so every child is registered by then
    return pulumi.Output.all(cluster.nodes, cluster.hostfile, cluster.cost_per_hour).apply(check)


@pulumi.runtime.test
def test_releasing_still_declares_the_compute(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _with_phase("dev", "releasing")

    def check(nodes: list[Any]) -> None:
        assert [r.name for r in fake.resources if r.typ == POD] == ["dev-pod-0"]
        assert len(nodes) == 1

    return cluster.nodes.apply(check)


@pulumi.runtime.test
def test_released_with_stop_keeps_the_pods_declared_stopped_and_shows_no_nodes(
    fake: FakeProviders,
) -> pulumi.Output[None]:
    cluster = _with_phase("dev", "released", mode="stop")

    def check(out: list[Any]) -> None:
        nodes, hostfile, _per_hour = out
        pods = [r for r in fake.resources if r.typ == POD]
        assert [(p.name, p.inputs.get("desired_status")) for p in pods] == [("dev-pod-0", "EXITED")]
        assert not [r for r in fake.resources if "NodeFiles" in r.typ]  # nothing to deliver to
        assert nodes == [] and hostfile == ""

    return pulumi.Output.all(cluster.nodes, cluster.hostfile, cluster.cost_per_hour).apply(check)


@pulumi.runtime.test
def test_active_with_stop_mode_declares_running_pods(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _with_phase("dev", "active", mode="stop")

    def check(nodes: list[Any]) -> None:
        pods = [r for r in fake.resources if r.typ == POD]
        assert [p.inputs.get("desired_status") for p in pods] == [None] and len(nodes) == 1
        assert "boot" not in nodes[0]  # a first boot: the outputs are as they always were

    return cluster.nodes.apply(check)


def test_supervisor_section_model_is_strict() -> None:
    with pytest.raises(ValueError):
        SupervisorConfig.model_validate({"interval_min": "5"})


def test_ended_trials_are_a_pools_pod_indices_each_once() -> None:
    """trainstack:run.ended_trials (the supervisor's, issue #42): accepted as a YAML list on a pool; refused
    on a cluster, out of range or twice, naming the key and the fix."""
    from stackconfig import files
    from stackconfig.config import ConfigError
    from stackconfig.loader import load_stack_config

    values = files.read_config("search")
    ok = load_stack_config({**values, "trainstack:run": {"max_cost_usd": 1500, "ended_trials": [3, 1]}})
    assert ok.run.ended_trials == (3, 1)
    for bad, why in (([4], "pod indices 0-3"), ([1, 1], "each once"), (["1"], "whole number")):
        with pytest.raises(ConfigError, match=why) as err:
            load_stack_config({**values, "trainstack:run": {"ended_trials": bad}})
        assert "trainstack:run.ended_trials" in str(err.value)
    prod = files.read_config("prod")
    with pytest.raises(ConfigError, match="only a pool of pods"):
        load_stack_config({**prod, "trainstack:run": {"ended_trials": [0]}})
