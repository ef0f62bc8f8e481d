"""Stack config parsing: the committed stacks load, and every rule names its key path and its fix."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from stackconfig.config import ConfigError, secret_config_key
from stackconfig.loader import load_stack_config
from stackconfig.pricing import cost_per_hour, gpu_hour_price
from stackconfig.rules import unverified_spend_limit_notice
from tests.components.conftest import stack_config

# A valid prod-like config; each case below breaks exactly one rule.
BASE: dict[str, Any] = {
    "trainstack:cluster": {
        "gpu_type": "H100_SXM",
        "topology": "cluster",
        "nodes": 8,
        "gpus_per_node": 8,
        "data_centers": ["US-TX-3"],
        "volume_gb": 1000,
    },
    "trainstack:bucket": {"name": "ckpt-bucket", "region": "us-east-1"},
    "trainstack:training": {
        "nccl_min_busbw_gb_per_s": 100,
        "secrets": ["HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
    },
    "trainstack:runpod_spend_limit_per_hour": 300,
}


def _with(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    key, _, field = path.partition(".")
    if not field:
        raw[f"trainstack:{key}"] = value
    else:
        raw[f"trainstack:{key}"][field] = value
    return raw


# (case id, raw config, key path in the message, words of the fix that must appear)
def _auto_pool_with_registry(capacity: str) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["trainstack:cluster"].update(
        topology="pods", nodes=2, capacity=capacity, bid_per_gpu=2.5, volume_gb=0, data_centers=[],
        registry_auth={"name": "ghcr", "username": "team"},
    )  # fmt: skip
    raw["trainstack:training"]["checkpoint_interval_min"] = 10
    return raw


INVALID = [
    (
        "unknown-gpu",
        _with("cluster.gpu_type", "A100"),
        "trainstack:cluster.gpu_type",
        "use one of B200, H100_NVL",
    ),
    (
        "cluster-1-node",
        _with("cluster.nodes", 1),
        "trainstack:cluster.nodes",
        "use topology 'pods' for 1 node",
    ),
    ("cluster-9-nodes", _with("cluster.nodes", 9), "trainstack:cluster.nodes", "must be 2-8"),
    ("zero-nodes", _with("cluster.nodes", 0), "trainstack:cluster.nodes", "must be at least 1"),
    ("odd-gpu-count", _with("cluster.gpus_per_node", 3), "trainstack:cluster.gpus_per_node", "use one of"),
    (
        "cluster-half-node",
        _with("cluster.gpus_per_node", 4),
        "trainstack:cluster.gpus_per_node",
        "set gpus_per_node: 8",
    ),
    (
        "pcie-cluster",
        _with("cluster.gpu_type", "H100_PCIE"),
        "trainstack:cluster.topology",
        "use gpu_type H100_SXM",
    ),
    ("bad-topology", _with("cluster.topology", "mesh"), "trainstack:cluster.topology", "'cluster' or 'pods'"),
    (
        "spot-cluster",
        _with("cluster.capacity", "spot"),
        "trainstack:cluster.capacity",
        "set capacity: on_demand",
    ),
    ("bad-dc", _with("cluster.data_centers", ["texas"]), "trainstack:cluster.data_centers", "'US-TX-3'"),
    ("dc-string", _with("cluster.data_centers", "US-TX-3"), "trainstack:cluster.data_centers", "[US-TX-3]"),
    (
        "dc-json-text",
        _with("cluster.data_centers", '["US-TX-3", "EU-RO-1"]'),
        "trainstack:cluster.data_centers",
        "data_centers[0]' US-TX-3",
    ),
    (
        "dc-twice",
        _with("cluster.data_centers", ["US-TX-3", "EU-RO-1", "US-TX-3"]),
        "trainstack:cluster.data_centers",
        "once, in the order to try",
    ),
    ("no-dc", _with("cluster.data_centers", []), "trainstack:cluster.data_centers", "'EU-RO-1'"),
    (
        "latest-image",
        _with("cluster.image", "runpod/pytorch:latest"),
        "trainstack:cluster.image",
        "never 'latest'",
    ),
    (
        "tiny-disk",
        _with("cluster.container_disk_gb", 5),
        "trainstack:cluster.container_disk_gb",
        "at least 20",
    ),
    ("huge-volume", _with("cluster.volume_gb", 5000), "trainstack:cluster.volume_gb", "10-4096"),
    (
        "community-volume",
        _with("cluster.cloud", "COMMUNITY"),
        "trainstack:cluster.cloud",
        "set cloud: SECURE",
    ),
    ("bad-port", _with("cluster.master_port", 80), "trainstack:cluster.master_port", "29500"),
    ("bad-bucket", _with("bucket.name", "Bad_Bucket"), "trainstack:bucket.name", "lowercase"),
    ("bad-region", _with("bucket.region", "virginia"), "trainstack:bucket.region", "'us-east-1'"),
    ("bad-kms", _with("bucket.kms_key_id", "my key"), "trainstack:bucket.kms_key_id", "or omit it"),
    ("empty-command", _with("training.command", []), "trainstack:training.command", "['train/train.py']"),
    ("endless-run", _with("training.max_run_hours", 500), "trainstack:training.max_run_hours", "at most 168"),
    (
        "interval-too-long",
        _with("training.checkpoint_interval_min", 6000),
        "trainstack:training.checkpoint_interval_min",
        "pick an interval inside the run",
    ),
    (
        "no-floor-on-cluster",
        _with("training.nccl_min_busbw_gb_per_s", 0),
        "trainstack:training.nccl_min_busbw_gb_per_s",
        "set a floor",
    ),
    (
        "negative-disk-floor",
        _with("training.min_free_disk_gb", -1),
        "trainstack:training.min_free_disk_gb",
        "use 0 to skip",
    ),
    (
        "too-many-restarts",
        _with("training.max_restarts", 50),
        "trainstack:training.max_restarts",
        "must be 0-10",
    ),
    (
        "reserved-secret",
        _with("training.secrets", ["MASTER_ADDR"]),
        "trainstack:training.secrets",
        "not set by RunPod",
    ),
    (
        "bucket-without-s3-keys",
        _with("training.secrets", ["HF_TOKEN"]),
        "trainstack:training.secrets",
        "add them to training.secrets",
    ),
    (
        "over-spend-limit",
        _with("runpod_spend_limit_per_hour", 80),
        "trainstack:runpod_spend_limit_per_hour",
        "ask RunPod to raise the account limit",
    ),
    (
        "zero-spend-limit",
        _with("runpod_spend_limit_per_hour", 0),
        "trainstack:runpod_spend_limit_per_hour",
        "default account limit is 80",
    ),
    (
        "typo-key",
        {**BASE, "trainstack:clustr": "{}"},
        "trainstack:clustr",
        "did you mean trainstack:cluster?",
    ),
    (
        "typo-field",
        _with("cluster.node", 8),
        "trainstack:cluster.node",
        "did you mean trainstack:cluster.nodes?",
    ),
    ("not-a-number", _with("cluster.nodes", "eight"), "trainstack:cluster.nodes", "write a whole number"),
    (
        "bad-json",
        {**BASE, "trainstack:training": "{not json"},
        "trainstack:training",
        "write it as a YAML mapping",
    ),
    (
        "bad-bool",
        {**BASE, "trainstack:delivery_enabled": "maybe"},
        "trainstack:delivery_enabled",
        "write true or false",
    ),
    # issue 24: non-finite numbers, booleans or text where numbers belong, image references, workdir
    (
        "nan-floor",
        _with("training.nccl_min_busbw_gb_per_s", "nan"),
        "trainstack:training.nccl_min_busbw_gb_per_s",
        "finite number",
    ),
    (
        "nan-float-floor",
        _with("training.nccl_min_busbw_gb_per_s", float("nan")),
        "trainstack:training.nccl_min_busbw_gb_per_s",
        "finite number",
    ),
    (
        "inf-hours",
        _with("training.max_run_hours", float("inf")),
        "trainstack:training.max_run_hours",
        "finite number",
    ),
    (
        "nan-limit",
        _with("runpod_spend_limit_per_hour", "nan"),
        "trainstack:runpod_spend_limit_per_hour",
        "finite number",
    ),
    (
        "huge-limit",
        _with("runpod_spend_limit_per_hour", "1e309"),
        "trainstack:runpod_spend_limit_per_hour",
        "finite number",
    ),
    ("bool-nodes", _with("cluster.nodes", True), "trainstack:cluster.nodes", "write a whole number"),
    ("text-nodes", _with("cluster.nodes", "8"), "trainstack:cluster.nodes", "write a whole number"),
    (
        "float-disk",
        _with("cluster.container_disk_gb", 50.5),
        "trainstack:cluster.container_disk_gb",
        "write a whole number",
    ),
    (
        "bool-hours",
        _with("training.max_run_hours", True),
        "trainstack:training.max_run_hours",
        "write a number",
    ),
    (
        "image-with-command",
        _with("cluster.image", "runpod/pytorch:2.4.0 ;reboot"),
        "trainstack:cluster.image",
        "is not a valid image reference",
    ),
    (
        "image-empty-tag",
        _with("cluster.image", "runpod/pytorch:"),
        "trainstack:cluster.image",
        "[registry[:port]/]name",
    ),
    (
        "image-uppercase",
        _with("cluster.image", "RunPod/PyTorch:2.4"),
        "trainstack:cluster.image",
        "lowercase",
    ),
    (
        "relative-workdir",
        _with("training.workdir", "work/trainstack"),
        "trainstack:training.workdir",
        "absolute path",
    ),
    (
        "dotdot-workdir",
        _with("training.workdir", "/workspace/../etc"),
        "trainstack:training.workdir",
        "without '..'",
    ),
    # Node health keys (train/node/): refused at preview with their key path.
    (
        "burn-in-negative",
        _with("training.burn_in_min", -5),
        "trainstack:training.burn_in_min",
        "0 (off) to 240",
    ),
    ("burn-in-day", _with("training.burn_in_min", 1440), "trainstack:training.burn_in_min", "10-15 minutes"),
    (
        "burn-in-text",
        _with("training.burn_in_min", "ten"),
        "trainstack:training.burn_in_min",
        "write a number",
    ),
    (
        "straggler-pct",
        _with("training.straggler_tolerance_pct", 0),
        "trainstack:training.straggler_tolerance_pct",
        "percentage from 1 to 90",
    ),
    (
        "busbw-drop-pct",
        _with("training.burn_in_busbw_drop_pct", 100),
        "trainstack:training.burn_in_busbw_drop_pct",
        "percentage from 1 to 90",
    ),
    ("metrics-port", _with("training.metrics_port", 80), "trainstack:training.metrics_port", "1024-65535"),
    (
        "metrics-port-rendezvous",
        _with("training.metrics_port", 29501),
        "trainstack:training.metrics_port",
        "is a rendezvous port",
    ),
    (
        "metrics-interval",
        _with("training.metrics_interval_s", 0.1),
        "trainstack:training.metrics_interval_s",
        "1-300 seconds",
    ),
    # Issue #34, class 6: knowable at preview, so refused at preview (an up used to create the credential,
    # the secrets and the bucket before the pod check refused).
    (
        "registry-on-auto",
        _auto_pool_with_registry("auto"),
        "trainstack:cluster.registry_auth",
        "capacity 'on_demand'",
    ),
    (
        "registry-on-spot",
        _auto_pool_with_registry("spot"),
        "trainstack:cluster.registry_auth",
        "capacity 'on_demand'",
    ),
    # class 4: numbers no float or RunPod holds
    ("nodes-401-digits", _with("cluster.nodes", int("9" * 401)), "trainstack:cluster.nodes", "number"),
    ("nodes-true", _with("cluster.nodes", True), "trainstack:cluster.nodes", "whole number"),
    ("gpus-huge", _with("cluster.gpus_per_node", 10**6), "trainstack:cluster.gpus_per_node", "at most 16"),
    (
        "spend-limit-true",
        _with("runpod_spend_limit_per_hour", True),
        "trainstack:runpod_spend_limit_per_hour",
        "write a number",
    ),
    (
        "spend-limit-huge",
        _with("runpod_spend_limit_per_hour", 1e308),
        "trainstack:runpod_spend_limit_per_hour",
        "at most",
    ),
    (
        "busbw-huge",
        _with("training.nccl_min_busbw_gb_per_s", 1e308),
        "trainstack:training.nccl_min_busbw_gb_per_s",
        "at most",
    ),
    (
        "disk-floor-huge",
        _with("training.min_free_disk_gb", 10**9),
        "trainstack:training.min_free_disk_gb",
        "at most",
    ),
    (
        "max-run-hours-true",
        _with("training.max_run_hours", True),
        "trainstack:training.max_run_hours",
        "boolean",
    ),
]


@pytest.mark.parametrize(("raw", "path", "fix"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_each_rule_names_path_and_fix(raw: dict[str, Any], path: str, fix: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    matching = [str(p) for p in exc.value.problems if p.path == path]
    assert matching, f"no problem for {path}: {exc.value}"
    assert any(fix in m and m.startswith(f"{path}: ") for m in matching), matching
    assert path in str(exc.value)


def test_base_is_valid() -> None:
    assert load_stack_config(BASE).cluster.nodes == 8


def test_spot_rules_for_pods() -> None:
    raw = _with("cluster.topology", "pods")
    raw["trainstack:cluster"].update(capacity="auto", nodes=2, volume_gb=0, data_centers=[])
    del raw["trainstack:bucket"]
    raw["trainstack:training"]["checkpoint_interval_min"] = 60
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    paths = {p.path for p in exc.value.problems}
    assert paths == {
        "trainstack:cluster.bid_per_gpu",
        "trainstack:bucket",
        "trainstack:training.checkpoint_interval_min",
    }


def test_every_problem_is_listed_at_once() -> None:
    raw = _with("cluster.gpu_type", "A100")
    raw["trainstack:training"]["max_run_hours"] = 0
    raw["trainstack:bogus"] = 1
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    assert {p.path for p in exc.value.problems} == {
        "trainstack:cluster.gpu_type",
        "trainstack:training.max_run_hours",
        "trainstack:bogus",
    }


def test_pulumi_string_values_are_parsed() -> None:
    """Pulumi hands objects over as JSON strings and scalars as strings."""
    raw = {
        "trainstack:cluster": '{"nodes": 1, "gpus_per_node": 8}',
        "trainstack:runpod_spend_limit_per_hour": "120",
        "trainstack:delivery_enabled": "true",
        "trainstack:s3EndpointUrl": "http://127.0.0.1:9000",
        "runpod:apiUrl": "http://127.0.0.1:8080",  # other namespaces are not ours
        secret_config_key("HF_TOKEN"): "never-looked-at",  # secret values are read apart
    }
    cfg = load_stack_config(raw)
    assert (cfg.runpod_spend_limit_per_hour, cfg.delivery_enabled) == (120.0, True)
    assert cfg.s3_endpoint_url == "http://127.0.0.1:9000"
    assert "never-looked-at" not in repr(cfg)


def test_committed_stacks() -> None:
    dev, search, prod = (stack_config(s) for s in ("dev", "search", "prod"))
    assert (dev.cluster.topology, dev.cluster.nodes, dev.cluster.capacity) == ("pods", 1, "on_demand")
    assert (search.cluster.topology, search.cluster.nodes, search.cluster.capacity) == ("pods", 4, "auto")
    assert (prod.cluster.topology, prod.cluster.nodes, prod.cluster.gpus_per_node) == ("cluster", 8, 8)
    assert prod.cluster.volume_gb > 0 and prod.bucket is not None
    assert {"HF_TOKEN", "WANDB_API_KEY"} <= set(prod.training.secrets)
    # 64 x $3.99 = $255.36/h is above RunPod's default $80/h: prod declares the raised limit.
    assert 255 < cost_per_hour(prod) <= prod.runpod_spend_limit_per_hour
    assert dev.runpod_spend_limit_per_hour == 80


def test_non_finite_model_figures_are_refused() -> None:
    model = {"parameters": float("inf"), "tokens": 1e12, "layers": 32, "hidden_size": 4096}
    model |= {"attention_heads": 32, "sequence_length": 4096}
    with pytest.raises(ConfigError) as exc:
        load_stack_config(_with("training.model", model))
    assert any(p.path == "trainstack:training.model.parameters" for p in exc.value.problems), exc.value


def test_numeric_text_is_a_number() -> None:
    """`pulumi config set --path trainstack:training.max_run_hours 2.5` stores the text "2.5"."""
    assert load_stack_config(_with("training.max_run_hours", "2.5")).training.max_run_hours == 2.5


def test_bid_above_on_demand_is_refused() -> None:
    """RunPod bills a spot pod its bid: $4.60 on 32 GPUs is $147.20/h, not the on-demand $127.68."""
    raw = _with("cluster.topology", "pods")
    raw["trainstack:cluster"].update(capacity="spot", nodes=4, bid_per_gpu=4.60, volume_gb=0, data_centers=[])
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    bid = [str(p) for p in exc.value.problems if p.path == "trainstack:cluster.bid_per_gpu"]
    assert bid and "bid at most $3.99" in bid[0], exc.value


def test_budget_counts_the_dearer_of_bid_and_on_demand() -> None:
    raw = _with("cluster.topology", "pods")
    raw["trainstack:cluster"].update(capacity="auto", nodes=4, bid_per_gpu=2.49, volume_gb=0, data_centers=[])
    cfg = load_stack_config(raw)
    # the GPUs at on-demand (the dearer), plus every pod's container disk at $0.10/GB-month over 730 h
    disks = 4 * cfg.cluster.container_disk_gb * 0.10 / 730
    assert cost_per_hour(cfg) == pytest.approx(round(4 * 8 * 3.99 + disks, 2))
    dear = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"bid_per_gpu": 4.60})})
    assert gpu_hour_price(dear) == pytest.approx(4.60)


def test_secret_name_errors_mask_what_looks_like_a_value() -> None:
    token = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    with pytest.raises(ConfigError) as exc:
        load_stack_config(_with("training.secrets", ["HF_TOKEN", token, "MASTER_ADDR"]))
    text = str(exc.value)
    assert token not in text and token[:12] not in text, text
    assert "'MASTER_ADDR'" in text and "wJa…" in text and "(40 characters)" in text


def test_a_stack_above_the_default_spend_limit_is_told_its_declared_limit_is_unverified() -> None:
    # Issue 24.11: RunPod's API reports no account spend limit, so prod's declared $300/h cannot be checked;
    # the preview says so plainly, naming the declared figure and what fails if it is wrong.
    notice = unverified_spend_limit_notice(stack_config("prod"))
    assert notice is not None
    assert "UNVERIFIED" in notice and "$300/h" in notice and "$80/h" in notice
    assert "creates the volume, secrets and bucket and then fails on the compute" in notice


def test_a_stack_within_the_default_spend_limit_has_nothing_to_verify() -> None:
    assert unverified_spend_limit_notice(stack_config("dev")) is None


def test_old_busbw_key_still_works_and_says_it_is_deprecated() -> None:
    raw = copy.deepcopy(BASE)
    secrets = BASE["trainstack:training"]["secrets"]
    raw["trainstack:training"] = {"nccl_min_busbw_gbps": 150, "secrets": secrets}
    said: list[str] = []
    cfg = load_stack_config(raw, warn=said.append)
    assert cfg.training.nccl_min_busbw_gb_per_s == 150
    assert len(said) == 1
    assert "trainstack:training.nccl_min_busbw_gbps is deprecated" in said[0]
    assert "GB/s" in said[0] and "rename it to nccl_min_busbw_gb_per_s" in said[0]
    # Without a callback the message is a DeprecationWarning; a JSON string (as Pulumi gives it) works too.
    raw["trainstack:training"] = json.dumps({"nccl_min_busbw_gbps": 150, "secrets": secrets})
    with pytest.warns(DeprecationWarning, match="rename it to nccl_min_busbw_gb_per_s"):
        assert load_stack_config(raw).training.nccl_min_busbw_gb_per_s == 150


def test_old_and_new_busbw_keys_together_are_an_error() -> None:
    raw = _with("training.nccl_min_busbw_gbps", 100)
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw, warn=lambda _: None)
    assert "trainstack:training" in str(err.value) and "keep only nccl_min_busbw_gb_per_s" in str(err.value)


def test_the_new_key_gives_no_deprecation_message() -> None:
    said: list[str] = []
    load_stack_config(BASE, warn=said.append)
    assert said == []


def test_the_bucket_accepts_force_destroy_as_its_own_advice_says() -> None:
    # Issue 24.10: the provider's refusal says "set force_destroy: true"; the config used to reject the key.
    raw = copy.deepcopy(BASE)
    raw["trainstack:bucket"]["force_destroy"] = True
    config = load_stack_config(raw)
    assert config.bucket is not None and config.bucket.force_destroy is True
    assert load_stack_config(BASE).bucket.force_destroy is False  # type: ignore[union-attr]


def test_protect_is_off_by_default_and_on_in_prod() -> None:
    assert load_stack_config(BASE).protect is False
    assert stack_config("prod").protect is True
    assert stack_config("dev").protect is False


def test_a_cluster_stack_naming_a_private_registry_is_refused_with_the_reason() -> None:
    """RunPod's CreateClusterRequest: "Private registries are not yet supported for clusters"."""
    raw = copy.deepcopy(BASE)
    auth = {"name": "ghcr", "username": "bot"}
    cluster = {**raw["trainstack:cluster"], "registry_auth": auth}  # BASE is an Instant Cluster
    with pytest.raises(ConfigError) as exc:
        load_stack_config({**raw, "trainstack:cluster": cluster})
    [problem] = [str(p) for p in exc.value.problems if p.path == "trainstack:cluster.registry_auth"]
    assert "Instant Clusters cannot pull from private registries" in problem and "topology 'pods'" in problem
    pods = {**cluster, "topology": "pods", "nodes": 1}
    assert load_stack_config({**raw, "trainstack:cluster": pods}).cluster.registry_auth is not None
