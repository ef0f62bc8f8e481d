"""The pack as a whole: policy metadata, the per-stack config files, and the pack served over gRPC."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationArgs
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE

from policy.rules import ALL_POLICIES
from policy.rules.common import model_of
from tests.policy.factories import CLUSTER, POD, Reports, cluster, pod, resource_args, urn_of

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "policy" / "config").glob("*.json"))
# a run longer than max_run_hours resumes from its checkpoint; a memory band straddling the GPU asks for a
# check
ADVISORY = {"run-fits-max-hours", "model-may-not-fit-gpu-memory", "capacity-available"}


def test_every_policy_is_documented_mandatory_and_configurable() -> None:
    names = [p.name for p in ALL_POLICIES]
    assert len(names) == len(set(names))
    readme = (ROOT / "policy" / "README.md").read_text()
    for policy in ALL_POLICIES:
        expected = EnforcementLevel.ADVISORY if policy.name in ADVISORY else EnforcementLevel.MANDATORY
        assert policy.enforcement_level is expected
        assert policy.description and policy.remediation_steps
        assert policy.config_schema is not None and policy.config_schema.properties
        assert f"`{policy.name}`" in readme
        model = model_of(policy.config_schema)
        assert model is not None
        for key, spec in policy.config_schema.properties.items():
            # A deprecated cap key is served without its default (the engine would fill it in as if the
            # file had written it; policy/rules/common.py UNFILLED); the model still has one.
            assert "default" in spec or model.model_fields[key].default is not None, (policy.name, key)
            assert "description" in spec, (policy.name, key)
            assert f"`{key}`" in readme, (policy.name, key)


def test_stack_configs_exist_for_each_stack() -> None:
    # One policy config per shipped stack, no more, no less (scripts/up passes policy/config/<stack>.json).
    stacks = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert [c.stem for c in CONFIGS] == stacks


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_stack_config_names_real_policies_with_valid_settings(path: Path) -> None:
    config: dict[str, Any] = json.loads(path.read_text())
    by_name = {p.name: p for p in ALL_POLICIES}
    assert set(config) == set(by_name)
    for name, settings in config.items():
        settings = {k: v for k, v in settings.items() if k != "enforcementLevel"}
        reports = Reports()
        policy = by_name[name]
        if isinstance(policy, ResourceValidationPolicy):
            policy.validate(resource_args(POD, "p", pod(), settings), reports)
        else:
            policy.validate(StackValidationArgs([], settings), reports)
        assert not any("policy config is invalid" in m for m in reports.messages), (name, reports.text)


def test_importing_the_pack_entry_point_starts_nothing() -> None:
    module = importlib.import_module("policy.__main__")
    assert callable(module.main)


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """The pack started the way the CLI starts it: `python -m pulumi.policy <engine> <pack dir>`."""
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=ROOT / "policy",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


def _configure(stub: analyzer_pb2_grpc.AnalyzerStub, path: Path) -> None:
    entries = {
        name: analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.MANDATORY, properties=_struct(settings))
        for name, settings in json.loads(path.read_text()).items()
    }
    stub.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=entries))


def test_served_pack_lists_every_policy(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "trainstack"
    assert sorted(p.name for p in info.policies) == sorted(p.name for p in ALL_POLICIES)
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert {n for n, lvl in levels.items() if lvl != analyzer_pb2.MANDATORY} == ADVISORY
    assert all(levels[n] == analyzer_pb2.ADVISORY for n in ADVISORY)


def test_served_pack_tolerates_unknowns_in_preview(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    _configure(analyzer, ROOT / "policy" / "config" / "dev.json")
    props = pod(
        capacity=UNKNOWN_STRING_VALUE,
        volume_id=UNKNOWN_STRING_VALUE,
        env={"HF_TOKEN": UNKNOWN_STRING_VALUE},
        gpu_count=UNKNOWN_NUMBER_VALUE,
    )
    request = analyzer_pb2.AnalyzeRequest(type=POD, properties=_struct(props), urn=urn_of(POD, "p"), name="p")
    response = analyzer.Analyze(request)
    assert list(response.diagnostics) == []


def test_served_pack_blocks_prod_cluster_over_dev_spend_limit(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    _configure(analyzer, ROOT / "policy" / "config" / "dev.json")
    resource = analyzer_pb2.AnalyzerResource(
        type=CLUSTER, properties=_struct(cluster()), urn=urn_of(CLUSTER, "prod-cluster"), name="prod-cluster"
    )
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[resource]))
    by_policy = {d.policyName: d for d in response.diagnostics}
    assert "runpod-spend-limit" in by_policy and "hourly-burn-limit" in by_policy
    spend = by_policy["runpod-spend-limit"]
    assert spend.enforcementLevel == analyzer_pb2.MANDATORY
    assert "$175.36/h over RunPod's account spend limit of $80/h" in spend.message

    _configure(analyzer, ROOT / "policy" / "config" / "prod.json")
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[resource]))
    assert [d.policyName for d in response.diagnostics] == []
