"""Bad policy pack config (`--policy-pack-config`, one key broken each) is refused naming the key: by the
config schema each policy serves the engine, and by the policy itself, a mandatory violation.

The cases are dev's shipped config with one policy's entry replaced, as tests/e2e/test_bad_input.py passes
them to a real `pulumi preview`. That file keeps one real preview per way the engine refuses (the schema it
validates, the policy's mandatory violation): how the CLI prints each and that nothing is created.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pulumi_policy import EnforcementLevel, Policy, ResourceValidationPolicy

from policy.rules import ALL_POLICIES
from tests.policy.factories import POD, Reports, check_resource, check_stack, pod, stack_resource
from tests.policy.test_config_file import REPO

DEV_SETTINGS: dict[str, dict[str, Any]] = json.loads((REPO / "policy/config/dev.json").read_text())
BY_NAME = {p.name: p for p in ALL_POLICIES}

# (case id, policy, config that breaks it, words the message must contain)
BAD_POLICY_CONFIG = [
    ("negative-hourly-cap", "hourly-burn-limit", {"max_hourly_usd": -5}, "max_hourly_usd"),
    ("hourly-cap-as-text", "hourly-burn-limit", {"max_hourly_usd": "lots"}, "max_hourly_usd"),
    ("spot-share-above-1", "spot-share-limit", {"max_spot_share": 1.5}, "max_spot_share"),
    ("misspelt-key", "runpod-spend-limit", {"runpod_spend_limt_per_hour": 300}, "runpod_spend_limt_per_hour"),
    (
        "gpu-list-not-a-list",
        "allowed-gpu-types",
        {"allowed_gpu_types": "NVIDIA H100 80GB HBM3"},
        "allowed_gpu_types",
    ),
    (
        "checkpoint-interval-zero",
        "spot-checkpointing",
        {"max_checkpoint_interval_s": 0},
        "max_checkpoint_interval_s",
    ),
]
# The served schema has no `additionalProperties: false` (pulumi_policy sends properties and required
# only), so the engine lets a misspelt key through and the policy's own model (extra="forbid") refuses it.
SCHEMA_PASSES = {"misspelt-key"}


def served_schema(policy: Policy) -> dict[str, Any]:
    """The JSON schema the engine validates this policy's config against: what pulumi_policy's
    GetAnalyzerInfo sends (the properties and required keys of `config_schema`) in an object."""
    schema = policy.config_schema
    assert schema is not None, policy.name
    return {"type": "object", "properties": schema.properties, "required": list(schema.required or [])}


def _validate(policy: Policy, config: dict[str, Any]) -> Reports:
    """The policy as a plain function over dev's one pod, as the preview hands it over."""
    if isinstance(policy, ResourceValidationPolicy):
        return check_resource(policy, POD, pod(), config)
    return check_stack(policy, [stack_resource(POD, "dev-pod-0", pod())], config)


@pytest.mark.parametrize(
    ("case", "name", "config", "named"), BAD_POLICY_CONFIG, ids=[c[0] for c in BAD_POLICY_CONFIG]
)
def test_bad_policy_config(case: str, name: str, config: dict[str, Any], named: str) -> None:
    policy = BY_NAME[name]
    settings = {**DEV_SETTINGS, name: config}
    # Mandatory (the pack's level; dev.json sets none for it), so the violation fails the preview.
    assert "enforcementLevel" not in settings[name]
    assert policy.enforcement_level == EnforcementLevel.MANDATORY
    reports = _validate(policy, settings[name])
    assert "policy config is invalid" in reports.text and named in reports.text, reports.text
    errors = list(jsonschema.Draft7Validator(served_schema(policy)).iter_errors(settings[name]))
    if case in SCHEMA_PASSES:
        assert errors == []
    else:
        assert errors and all(list(e.absolute_path) == [named] for e in errors), errors


def test_dev_settings_pass_both() -> None:
    """The control: dev's shipped settings pass the served schemas and the policies' own models."""
    for name in sorted({c[1] for c in BAD_POLICY_CONFIG}):
        policy, settings = BY_NAME[name], DEV_SETTINGS[name]
        assert list(jsonschema.Draft7Validator(served_schema(policy)).iter_errors(settings)) == []
        assert "policy config is invalid" not in _validate(policy, settings).text, name
