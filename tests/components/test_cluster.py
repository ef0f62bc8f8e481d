"""H100Cluster under Pulumi mocks: the resources it declares, their wiring and its outputs, per stack.

The mocks answer like the providers do (docs/ARCHITECTURE.md outputs); provider behaviour itself is tested
in tests/providers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pytest

from components.cluster import H100Cluster, H100ClusterArgs
from stackconfig.config import RegistryAuthConfig
from tests.components.conftest import stack_config

PRICE = 3.99  # USD/GPU-h the fake catalog charges
DISK_MONTH, VOLUME_MONTH = 0.10, 0.07  # USD/GB/month (docs.runpod.io/get-started/billing-information)
POD = "pulumi-python:dynamic/runpod:Pod"
CLUSTER = "pulumi-python:dynamic/runpod:InstantCluster"
VOLUME = "pulumi-python:dynamic/runpod:NetworkVolume"
SECRET = "pulumi-python:dynamic/runpod:Secret"
BUCKET = "pulumi-python:dynamic/s3:CheckpointBucket"
REGISTRY = "pulumi-python:dynamic/runpod:RegistryAuth"
NODE_FILES = "pulumi-python:dynamic/delivery:NodeFiles"
SECRETS_FILE = "pulumi-python:dynamic/delivery:SecretsFile"
SECRET_VALUES = {
    "HF_TOKEN": "hf-SECRET",
    "WANDB_API_KEY": "wb-SECRET",
    "AWS_ACCESS_KEY_ID": "AKIA-SECRET",
    "AWS_SECRET_ACCESS_KEY": "aws-SECRET",
}


class FakeProviders(pulumi.runtime.Mocks):
    """Records every resource and answers with the outputs the real providers compute."""

    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(args)
        inputs = {k: v for k, v in args.inputs.items() if k != "__provider"}
        index = int(args.name.rsplit("-", 1)[-1]) if args.name[-1].isdigit() else 0  # pod i -> i
        return f"{args.name}-id", {**inputs, **self._outputs(args.typ, inputs, index)}

    @staticmethod
    def _outputs(typ: str, i: Mapping[str, Any], n: int) -> dict[str, Any]:
        disk = i.get("container_disk_gb", 0) * DISK_MONTH
        if typ == POD:
            return {
                "pod_id": f"pod{n}",
                "private_ip": f"10.1.0.{n}",
                "ssh_host": "203.0.113.9",
                "ssh_port": 40000 + n,
                "cost_per_hour": i["gpu_count"] * PRICE,
                "storage_cost_per_month": disk,
            }
        if typ == CLUSTER:
            count = int(i["pod_count"])
            nodes = [
                {
                    "rank": r,
                    "pod_id": f"cpod{r}",
                    "ip": f"10.65.0.{r + 2}",
                    "ssh_host": "203.0.113.9",
                    "ssh_port": 41000 + r,
                }
                for r in range(count)
            ]
            return {
                "cluster_id": "c1",
                "nodes": nodes,
                "cost_per_hour": count * i["gpu_count_per_pod"] * PRICE,
                "storage_cost_per_month": count * disk,
            }
        if typ == VOLUME:
            plan = i.get("placement") or {}
            return {
                # As the provider's check() fills it in from `placement` (tests/providers/runpod).
                "data_center_id": i.get("data_center_id") or (plan.get("candidates") or [None])[0],
                "volume_id": "vol1",
                "cost_per_hour": 0.0,
                "storage_cost_per_month": i["size_gb"] * VOLUME_MONTH,
            }
        if typ == SECRET:
            return {"secret_id": f"s{n}", "cost_per_hour": 0.0, "storage_cost_per_month": 0.0}
        if typ == SECRETS_FILE:
            return {"values_hash": "hmac-sha256$00$00", "version": f"v{n}", "delivered_at": 0.0}
        if typ == REGISTRY:
            return {"registry_id": "reg1", "cost_per_hour": 0.0, "storage_cost_per_month": 0.0}
        return {"arn": "arn:aws:s3:::x", "endpoint_url": "http://127.0.0.1:9000"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeProviders:
    # The target is a real RunPod (delivery can reach the nodes), whatever RUNPOD_API_URL this process has.
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    mocks = FakeProviders()
    pulumi.runtime.set_mocks(mocks, preview=False)
    return mocks


def _declare(stack: str) -> H100Cluster:
    config = stack_config(stack)
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    return H100Cluster(stack, H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))


def _outputs(cluster: H100Cluster) -> pulumi.Output[dict[str, Any]]:
    return pulumi.Output.all(
        nodes=cluster.nodes,
        hostfile=cluster.hostfile,
        scripts=cluster.start_scripts,
        per_hour=cluster.cost_per_hour,
        per_run=cluster.cost_per_run,
        # waits for the deliveries too: their inputs wait on the nodes, so they register last
        deliveries=pulumi.Output.all(*[d.id for d in cluster.deliveries]),
    )


def _forecast_hours(stack: str) -> float:
    from forecast.stack import stack_forecast

    fc = stack_forecast(stack_config(stack))
    assert fc is not None
    return fc.compute.hours


def _children(fake: FakeProviders) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for r in fake.resources:
        kinds.setdefault(r.typ, []).append(r.name)
    return {k: sorted(v) for k, v in kinds.items()}


def _no_secret_values(fake: FakeProviders) -> None:
    """No value anywhere but in a SecretsFile's `values` (a Pulumi secret: SecretsFile.props_of)."""
    for r in fake.resources:
        if r.typ != SECRETS_FILE:
            assert not any(v in repr(r.inputs) for v in SECRET_VALUES.values()), r.name
    assert SECRET not in _children(fake)  # RunPod's secret store is GraphQL-only, and GraphQL retires


def _secrets_files(fake: FakeProviders) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in fake.resources if r.typ == SECRETS_FILE}


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the engine marks a secret value (Pulumi's wire format)


def _secret(value: Any) -> Any:
    """The value of an input that reached the engine as a Pulumi secret (fails for a plain one)."""
    assert isinstance(value, dict) and SECRET_SIG in value, "not a Pulumi secret"
    return value["value"]


@pulumi.runtime.test
def test_dev(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("dev")

    def check(out: dict[str, Any]) -> None:
        assert _children(fake) == {
            "trainstack:index:H100Cluster": ["dev"],
            POD: ["dev-pod-0"],
            NODE_FILES: ["dev-deliver-0"],  # delivery is on by default: the node gets its files and starts
            SECRETS_FILE: ["dev-secrets-0"],  # ... after its secrets, over the same SSH
            BUCKET: ["dev-checkpoints"],  # checkpoints survive the pod; no network volume (stack file)
        }
        pod = next(r for r in fake.resources if r.typ == POD)
        assert pod.inputs["gpu_type_id"] == "NVIDIA H100 80GB HBM3"
        assert (pod.inputs["gpu_count"], pod.inputs["capacity"], pod.inputs.get("volume_id")) == (
            8, "on_demand", None
        )  # fmt: skip
        # the ownership mark (ops/ownership.py) alone: no secret, not even a reference, in RunPod's definition
        assert pod.inputs["env"] == {"TRAINSTACK_OWNER": "project/dev"}
        secrets_file = _secrets_files(fake)["dev-secrets-0"]
        wanted = {k: SECRET_VALUES[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        assert _secret(secrets_file["values"]) == wanted  # a Pulumi secret, encrypted in state
        assert (secrets_file["pod_id"], secrets_file["path"]) == ("pod0", "/run/trainstack/secrets/pod0.env")
        delivery = next(r for r in fake.resources if r.typ == NODE_FILES).inputs
        assert delivery["secrets_version"] == "v0"  # new values restart the node's start script
        assert pod.inputs["training"]["max_run_hours"] == 2
        assert pod.inputs["training"]["checkpoint_bucket"] == "trainstack-dev-checkpoints"
        bucket = next(r for r in fake.resources if r.typ == BUCKET).inputs
        assert (bucket["bucket_name"], bucket["tls_only"], bucket.get("kms_key_id")) == (
            "trainstack-dev-checkpoints", True, None
        )  # fmt: skip
        _no_secret_values(fake)
        assert out["nodes"] == [
            {"rank": 0, "ip": "10.1.0.0", "pod_id": "pod0", "ssh_endpoint": "203.0.113.9:40000"}
        ]
        assert out["hostfile"] == "10.1.0.0 slots=8\n"
        assert list(out["scripts"]) == ["start-node-0.sh"]
        assert out["per_hour"] == round(8 * PRICE + 50 * DISK_MONTH / 730, 2)
        # dev declares a model: one run is the forecast's hours (not max_run_hours) at the hourly price
        assert out["per_run"] == round(out["per_hour"] * _forecast_hours("dev"), 2)

    return _outputs(cluster).apply(check)


@pulumi.runtime.test
def test_search(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("search")

    def check(out: dict[str, Any]) -> None:
        kinds = _children(fake)
        assert kinds[POD] == [f"search-pod-{i}" for i in range(4)]
        assert kinds[BUCKET] == ["search-checkpoints"]
        assert kinds[SECRETS_FILE] == [f"search-secrets-{i}" for i in range(4)]
        assert {tuple(sorted(_secret(f["values"]))) for f in _secrets_files(fake).values()} == {
            ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY")
        }
        assert VOLUME not in kinds and CLUSTER not in kinds
        pods = [r for r in fake.resources if r.typ == POD]
        assert {(p.inputs["capacity"], p.inputs["bid_per_gpu"]) for p in pods} == {("auto", 2.49)}
        assert "WANDB_API_KEY" not in pods[0].inputs["env"]
        assert len({p.inputs["name"] for p in pods}) == 4
        assert out["hostfile"].splitlines() == [f"10.1.0.{i} slots=8" for i in range(4)]
        assert out["per_hour"] == round(32 * PRICE + 4 * 50 * DISK_MONTH / 730, 2)
        _no_secret_values(fake)

    return _outputs(cluster).apply(check)


def _pool_files(fake: FakeProviders) -> dict[str, Any]:
    return {r.name: r.inputs["files"] for r in fake.resources if r.typ == NODE_FILES}


@pytest.mark.parametrize("mode", ["delete", "stop"])
def test_a_pools_ended_trial_releases_its_own_pod_alone(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """trainstack:run.ended_trials (the supervisor's, issue #42): pod 1's trial ended while 0, 2, 3 train.
    Its pod alone is released (stop: declared EXITED; delete: not declared) and gets no files; every other
    pod's files are byte for byte what they were, so no running trial is re-delivered or restarted."""
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    base = stack_config("search")
    cluster_cfg = base.cluster.model_copy(update={"capacity": "on_demand", "bid_per_gpu": None})
    sup = base.supervisor.model_copy(update={"release_mode": mode})
    results: dict[str, Any] = {}
    for ended in ((), (1,)):
        fake = FakeProviders()
        pulumi.runtime.set_mocks(fake, preview=False)
        run = base.run.model_copy(update={"ended_trials": ended})
        cfg = base.model_copy(update={"cluster": cluster_cfg, "supervisor": sup, "run": run})

        @pulumi.runtime.test
        def declare(cfg: Any = cfg, fake: FakeProviders = fake, ended: tuple[int, ...] = ended) -> Any:
            def keep(out: dict[str, Any]) -> None:
                results[str(ended)] = (out, _pool_files(fake), [r for r in fake.resources if r.typ == POD])

            secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in cfg.training.secrets}
            declared = H100Cluster("search", H100ClusterArgs(cfg, secrets, "http://127.0.0.1:9000"))
            return _outputs(declared).apply(keep)

        declare()
    (before, files0, _pods0), (after, files1, pods1) = results["()"], results["(1,)"]
    assert sorted(files1) == ["search-deliver-0", "search-deliver-2", "search-deliver-3"]
    for name, files in files1.items():
        assert files == files0[name], f"{name}'s files changed when another trial ended"
    assert [n["rank"] for n in after["nodes"]] == [0, 2, 3]
    assert [n for n in before["nodes"] if n["rank"] != 1] == after["nodes"]
    declared = {p.name: p.inputs.get("desired_status") for p in pods1}
    if mode == "stop":
        assert declared == {"search-pod-0": None, "search-pod-1": "EXITED", "search-pod-2": None,
                            "search-pod-3": None}  # fmt: skip
    else:  # (a stopped pod's $0/h is its provider's check(), which these mocks do not model)
        assert declared == {"search-pod-0": None, "search-pod-2": None, "search-pod-3": None}
        assert after["per_hour"] == round(before["per_hour"] * 3 / 4, 2)  # pod 1 bills no more


@pulumi.runtime.test
def test_prod(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("prod")

    def check(out: dict[str, Any]) -> None:
        kinds = _children(fake)
        assert kinds[CLUSTER] == ["prod-cluster"] and POD not in kinds
        assert kinds[VOLUME] == ["prod-volume"] and kinds[BUCKET] == ["prod-checkpoints"]
        assert kinds[SECRETS_FILE] == [f"prod-secrets-{r}" for r in range(8)]
        by_name = {r.name: r for r in fake.resources}
        main = by_name["prod-cluster"].inputs
        assert (main["pod_count"], main["gpu_count_per_pod"], main["cluster_type"]) == (8, 8, "TRAINING")
        assert main["data_center_id"] == by_name["prod-volume"].inputs["data_center_id"] == "US-TX-3"
        assert main["volume_id"] == "prod-volume-id"  # the resource id, which is RunPod's volume id
        assert set(main["env"]) == {"TRAINSTACK_OWNER"}
        bucket = by_name["prod-checkpoints"].inputs
        assert bucket["kms_key_id"] == "alias/trainstack-checkpoints" and bucket["versioning"] is True
        _no_secret_values(fake)
        assert out["hostfile"].splitlines() == [f"10.65.0.{r + 2} slots=8" for r in range(8)]
        assert sorted(out["scripts"]) == [f"start-node-{r}.sh" for r in range(8)]
        assert [n["rank"] for n in out["nodes"]] == list(range(8))
        storage = (8 * 100 * DISK_MONTH + 2000 * VOLUME_MONTH) / 730
        assert out["per_hour"] == round(64 * PRICE + storage, 2)
        assert out["per_run"] == round(out["per_hour"] * _forecast_hours("prod"), 2)

    return _outputs(cluster).apply(check)


def _declare_config(config: Any) -> H100Cluster:
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    return H100Cluster("prod", H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))


def _prod_with(**cluster: Any) -> Any:
    config = stack_config("prod")
    return config.model_copy(update={"cluster": config.cluster.model_copy(update=cluster)})


@pulumi.runtime.test
def test_ordered_data_centers_commit_through_the_volume(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare_config(_prod_with(data_centers=("EU-RO-1", "US-TX-3")))

    def check(_: Any) -> None:
        by_name = {r.name: r for r in fake.resources}
        volume, main = by_name["prod-volume"].inputs, by_name["prod-cluster"].inputs
        assert "data_center_id" not in volume or volume["data_center_id"] is None
        assert volume["placement"] == {
            "candidates": ["EU-RO-1", "US-TX-3"],
            "gpu_type_id": "NVIDIA H100 80GB HBM3",
            "gpu_count": 8,
            "product": "CLUSTER",
            "cloud": "SECURE",
        }
        assert main["data_center_id"] == "EU-RO-1"  # the volume's output: the compute follows the volume
        assert main["data_center_ids"] == ["EU-RO-1", "US-TX-3"]  # reported in `availability`

    return _outputs(cluster).apply(check)


@pulumi.runtime.test
def test_prod_without_a_volume_lets_the_cluster_fall_back(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare_config(_prod_with(data_centers=("EU-RO-1", "US-TX-3"), volume_gb=0))

    def check(_: Any) -> None:
        main = next(r for r in fake.resources if r.name == "prod-cluster").inputs
        assert main.get("data_center_id") is None and main["data_center_ids"] == ["EU-RO-1", "US-TX-3"]
        assert not [r for r in fake.resources if r.typ == VOLUME]

    return _outputs(cluster).apply(check)


@pulumi.runtime.test
def test_children_are_parented(fake: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("prod")

    def check(_: Any) -> None:
        component = next(r for r in fake.resources if r.typ == "trainstack:index:H100Cluster")
        assert component.name == "prod"
        for r in fake.resources:
            if r is not component:
                assert r.name.startswith("prod-")

    return cluster.urn.apply(check)


def test_missing_secret_value_is_refused(fake: FakeProviders) -> None:
    with pytest.raises(ValueError, match="trainstack:secrets"):
        H100Cluster("prod", H100ClusterArgs(stack_config("prod"), {}))


REGISTRY_PASSWORD = "ghp_registry-SECRET"


@pulumi.runtime.test
def test_pods_pull_with_the_named_registry_credential(fake: FakeProviders) -> pulumi.Output[None]:
    config = stack_config("dev")
    auth = RegistryAuthConfig(name="ghcr", username="bot")
    config = config.model_copy(update={"cluster": config.cluster.model_copy(update={"registry_auth": auth})})
    password = pulumi.Output.secret(REGISTRY_PASSWORD)
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    cluster = H100Cluster("dev", H100ClusterArgs(config, secrets, None, password))

    def check(_: object) -> None:
        registry = next(r for r in fake.resources if r.typ == REGISTRY)
        assert registry.inputs["name"] == "trainstack-dev-ghcr" and registry.inputs["username"] == "bot"
        pods = [r for r in fake.resources if r.typ == POD]
        assert pods and all(p.inputs["registry_id"] == "reg1" for p in pods)
        others = [r for r in fake.resources if r.typ != REGISTRY]
        assert not any(REGISTRY_PASSWORD in repr(r.inputs) for r in others)

    return cluster.nodes.apply(check)


def test_a_named_registry_without_its_password_is_refused(fake: FakeProviders) -> None:
    config = stack_config("dev")
    auth = RegistryAuthConfig(name="ghcr", username="bot")
    config = config.model_copy(update={"cluster": config.cluster.model_copy(update={"registry_auth": auth})})
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    with pytest.raises(ValueError, match=r"trainstack:secrets\.REGISTRY_PASSWORD"):
        H100Cluster("dev", H100ClusterArgs(config, secrets, None))


@pulumi.runtime.test
def test_node_0_gets_the_alert_rules_of_the_components_own_forecast(
    fake: FakeProviders,
) -> pulumi.Output[None]:
    cluster = _declare("prod")
    assert cluster.forecast is not None
    hours = cluster.alert_rules.planned_hours
    assert hours == pytest.approx(cluster.forecast["hours"], abs=0.05) and hours != 24  # not max_run_hours

    def check(alerts_json: str) -> None:
        assert alerts_json == cluster.alert_rules.to_json()

    return cluster.artifacts.apply(lambda a: check(a.alerts_json))


def test_without_delivery_the_preview_says_the_secrets_reach_no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #67: no secret goes to RunPod any more, so a stack that starts its nodes its own way is told."""
    from components.delivery import deliver_to_nodes

    said: list[str] = []
    monkeypatch.setattr("pulumi.runtime.is_dry_run", lambda: True)
    monkeypatch.setattr("pulumi.log.warn", lambda message, *a, **k: said.append(message))
    config = stack_config("dev")
    config = config.model_copy(update={"delivery_enabled": False})
    assert deliver_to_nodes("dev", config, None, None, pulumi.ResourceOptions(), {"A": "v"}) == []  # type: ignore[arg-type]
    (line,) = said
    assert "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY reach no node" in line and "secrets_file.py" in line
