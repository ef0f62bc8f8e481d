"""Bad stack and policy config through the real CLI: a message naming the field and the fix, no traceback,
and not one mutating call reaches RunPod."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO
from tests.e2e.reliability import Report
from tests.e2e.stacks import StackRun, open_stack
from tests.stackconfig.test_config import INVALID

pytestmark = pytest.mark.e2e
MUTATING = ("POST ", "PATCH ", "PUT ", "DELETE ")

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


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, runpod: LocalRunPod, moto_s3: str) -> Iterator[StackRun]:
    runpod.admin.reset()
    yield open_stack("dev", tmp_path_factory.mktemp("bad-input"), runpod, moto_s3)
    runpod.admin.reset()


def _mutations(runpod: LocalRunPod) -> dict[str, Any]:
    endpoints = runpod.admin.counters()["endpoints"]
    return {
        e: c for e, c in endpoints.items() if e.startswith(MUTATING) and not e.startswith("POST /graphql")
    }


def _use_config(run: StackRun, raw: dict[str, Any]) -> None:
    stack_file = run.cli.project / "stacks" / f"Pulumi.{run.stack}.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    # The secret values open_stack set (dev's S3 keys: dev has a bucket) stay; only the config is swapped.
    kept = {k: v for k, v in (doc.get("config") or {}).items() if isinstance(v, dict) and "secure" in v}
    doc["config"] = {**kept, **raw}
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _json_safe(raw: dict[str, Any]) -> bool:
    try:
        json.dumps(raw, allow_nan=False)
    except ValueError:
        return False
    return True


# A NaN or infinite float inside a YAML object never reaches the program: the Pulumi CLI itself refuses the
# stack file ("json: unsupported value: NaN"). Those cases are unit tests only; "nan" as text is tested here.
CLI_INVALID = [c for c in INVALID if _json_safe(c[1])]


@pytest.mark.parametrize(
    ("raw", "path", "fix"), [c[1:] for c in CLI_INVALID], ids=[c[0] for c in CLI_INVALID]
)
def test_bad_stack_config(dev: StackRun, raw: dict[str, Any], path: str, fix: str, report: Report) -> None:
    before = _mutations(dev.runpod)
    _use_config(dev, raw)
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert path in output and fix in output, output
    assert "Traceback" not in output, output
    assert _mutations(dev.runpod) == before
    assert dev.cli.resources() == [] or all(
        not r["type"].startswith("pulumi-python") for r in dev.cli.resources()
    )
    _count(report, "bad input: invalid stack config (one rule broken each)")


@pytest.mark.parametrize(
    ("policy", "config", "named"), [c[1:] for c in BAD_POLICY_CONFIG], ids=[c[0] for c in BAD_POLICY_CONFIG]
)
def test_bad_policy_config(
    dev: StackRun, tmp_path: Path, policy: str, config: dict[str, Any], named: str, report: Report
) -> None:
    _use_config(dev, yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"])
    settings = json.loads((REPO / "policy/config/dev.json").read_text())
    settings[policy] = config
    bad = tmp_path / "policy.json"
    bad.write_text(json.dumps(settings))
    before = _mutations(dev.runpod)
    pack = ["--policy-pack", str(REPO / "policy"), "--policy-pack-config", str(bad)]
    result = dev.cli.run("preview", "--stack", dev.stack, *pack, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert named in output, output
    assert _mutations(dev.runpod) == before
    _count(report, "bad input: invalid policy config (one key broken each)")


def _count(report: Report, scenario: str) -> None:
    row = report.rows.get(scenario)
    runs = row.runs + 1 if row else 1
    report.record(
        scenario, f"{runs} refused, each naming the field and the fix; 0 mutating calls", [], [], runs
    )


# (case id, config key, plain-text value, key path the refusal names): credentials in plain text (issue 24).
CANARY_HF = "hf_" + "CanaryIssue24" * 3
PLAINTEXT_CASES = [
    ("secret-value-in-plain-text", "trainstack:secrets.HF_TOKEN", CANARY_HF, "trainstack:secrets.HF_TOKEN"),
    ("api-key-in-plain-text", "runpod:apiKey", "rpa_" + "CANARYKEY" * 4, "runpod:apiKey"),
    (
        "token-in-training-command",
        "trainstack:training",
        json.dumps({"command": ["train/train.py", f"--hf-token={CANARY_HF}"]}),
        "trainstack:training.command[1]",
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "named"), [c[1:] for c in PLAINTEXT_CASES], ids=[c[0] for c in PLAINTEXT_CASES]
)
def test_plaintext_credentials_are_refused(
    dev: StackRun, key: str, value: str, named: str, report: Report
) -> None:
    if key == "trainstack:training":
        raw = yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"]
        _use_config(dev, {**raw, key: {**raw[key], **json.loads(value)}})
    else:
        _use_config(dev, yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"])
        dev.cli.run("config", "set", "--plaintext", "--stack", dev.stack, key, value)
    before = _mutations(dev.runpod)
    result = dev.up(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert named in output and "Traceback" not in output, output
    assert CANARY_HF not in output and value not in output, output
    assert _mutations(dev.runpod) == before
    _use_config(dev, yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"])
    report.record(
        "secrets: secret keys in plain text, a token in training.command",
        f"{len(PLAINTEXT_CASES)} refused before anything was created, naming the key path; the value in 0 "
        "messages; 0 mutating calls",
        [],
        [],
        len(PLAINTEXT_CASES),
    )


def test_bad_stack_name_is_refused_before_anything_is_rented(dev: StackRun, report: Report) -> None:
    _use_config(dev, yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"])
    (dev.cli.project / "stacks" / "Pulumi.Dev_Red.yaml").write_text(
        (dev.cli.project / "stacks" / f"Pulumi.{dev.stack}.yaml").read_text()
    )
    dev.cli.run("stack", "init", "Dev_Red")
    before = _mutations(dev.runpod)
    result = dev.cli.run("up", "--yes", "--stack", "Dev_Red", *dev.policy_args(), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "lowercase letters, digits and '-'" in output, output
    assert "Traceback" not in output, output
    assert _mutations(dev.runpod) == before
    report.record(
        "bad input: stack name outside [a-z0-9-]",
        "refused before anything was registered; 0 mutating calls",
        [],
        [],
        1,
    )


# Issue #34, class 5: webhook URLs the aggregator would refuse (or post the secret URL over in clear) are
# refused at preview, naming the key and never the value.
BAD_WEBHOOKS = [
    ("no-scheme", "hooks.example.invalid/services/T0/B0/CANARYWEBHOOK"),
    ("file", "file:///CANARYWEBHOOK"),
    ("plain-http", "http://hooks.example.invalid/services/T0/B0/CANARYWEBHOOK"),
    ("user-and-password", "https://CANARYWEBHOOK:pw@hooks.example.invalid/services/T0/B0/x"),
    ("good-https", "https://hooks.example.invalid/services/T0/B0/x"),
]


@pytest.mark.parametrize("url", [c[1] for c in BAD_WEBHOOKS], ids=[c[0] for c in BAD_WEBHOOKS])
def test_a_webhook_url_the_aggregator_would_refuse_is_refused_at_preview(dev: StackRun, url: str) -> None:
    raw = yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"]
    training = dict(raw["trainstack:training"])
    training["secrets"] = [*training.get("secrets", []), "ALERT_WEBHOOK_URL"]
    _use_config(dev, {**raw, "trainstack:training": training})
    key = "trainstack:secrets.ALERT_WEBHOOK_URL"
    dev.cli.run("config", "set", "--secret", "--stack", dev.stack, key, url)
    before = _mutations(dev.runpod)
    try:
        result = dev.preview(check=False)
    finally:
        dev.cli.run("config", "rm", "--stack", dev.stack, key)
        _use_config(dev, raw)
    output = result.stdout + result.stderr
    if url.startswith("https://hooks"):  # the good one: previews clean, so the refusals are the URL's
        assert result.returncode == 0, output
        return
    assert result.returncode != 0, output
    assert key in output and "Traceback" not in output, output
    assert "CANARYWEBHOOK" not in output, output
    assert _mutations(dev.runpod) == before
