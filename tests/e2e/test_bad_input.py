"""Bad stack and policy config through the real CLI: a message naming the field and the fix, no traceback,
and not one mutating call reaches RunPod.

One real command per way the engine refuses (issue #47): a program-time config error on preview, a
plain-text credential on up, a stack name, a secret webhook URL, the policy config's served schema and the
policy's own mandatory violation; and one `pulumi config` that pins how the CLI hands every bad stack config
to the program. Every case of each kind is asserted without the CLI: the program under Pulumi mocks in
tests/components/test_bad_input.py, the policies as functions in tests/policy/test_bad_pack_config.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO
from tests.components.test_bad_input import (
    BAD_WEBHOOKS,
    CANARY_HF,
    CLI_INVALID,
    PLAINTEXT_CASES,
    WEBHOOK_KEY,
    engine_value,
)
from tests.e2e.reliability import Report
from tests.e2e.stacks import StackRun, open_stack
from tests.policy.test_bad_pack_config import BAD_POLICY_CONFIG

pytestmark = pytest.mark.e2e
MUTATING = ("POST ", "PATCH ", "PUT ", "DELETE ")

# The cases that run here, one per way the engine refuses; the rest run without the CLI (module docstring).
CLI_STACK_CONFIG = ["unknown-gpu"]
CLI_POLICY_CONFIG = {
    "negative-hourly-cap": "the served schema",  # the engine validates the config first
    "misspelt-key": "the policy's own model",  # passes the schema: a mandatory violation
}
CLI_PLAINTEXT = ["secret-value-in-plain-text"]
CLI_WEBHOOKS = ["plain-http"]


def _only(cases: list[Any], ids: list[str] | dict[str, str]) -> list[Any]:
    chosen = [c for c in cases if c[0] in ids]
    assert len(chosen) == len(ids), ids
    return chosen


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, runpod: LocalRunPod, moto_s3: str) -> Iterator[StackRun]:
    runpod.admin.reset()
    # The passphrase, as scripts/up's stacks have it: the bad-name case copies this stack's file to a new
    # stack, whose `stack init` reads the copied salt; a KMS stack's copy would need its data key anew.
    work = tmp_path_factory.mktemp("bad-input")
    yield open_stack("dev", work, runpod, moto_s3, policy=True, passphrase=True)
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


def _dev_config() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"])


def test_the_cli_hands_the_program_each_bad_config_as_the_mocks_do(dev: StackRun) -> None:
    """The program-under-mocks cases are only as good as their config: every bad stack config, in one stack
    file (each key renamed after its case), is what `engine_value` gives, as `pulumi config` reads it; the
    plain-text credentials are not secret, the webhook URL set with --secret is."""
    renamed = {
        f"trainstack:{case}.{key.split(':', 1)[1]}": value
        for case, raw, _, _ in CLI_INVALID
        for key, value in raw.items()
    }
    plaintext = {key: value for _, key, value, _ in PLAINTEXT_CASES if key != "trainstack:training"}
    _use_config(dev, renamed)
    try:
        for key, value in plaintext.items():
            dev.cli.run("config", "set", "--plaintext", "--stack", dev.stack, key, value)
        dev.cli.run("config", "set", "--secret", "--stack", dev.stack, WEBHOOK_KEY, BAD_WEBHOOKS[0][1])
        shown = json.loads(dev.cli.run("config", "--json", "--show-secrets", "--stack", dev.stack).stdout)
    finally:
        for key in [*plaintext, WEBHOOK_KEY]:
            dev.cli.run("config", "rm", "--stack", dev.stack, key, check=False)
        _use_config(dev, _dev_config())
    assert {key: shown[key]["value"] for key in renamed} == {k: engine_value(v) for k, v in renamed.items()}
    assert {key: (shown[key]["value"], shown[key]["secret"]) for key in plaintext} == {
        key: (value, False) for key, value in plaintext.items()
    }
    assert (shown[WEBHOOK_KEY]["value"], shown[WEBHOOK_KEY]["secret"]) == (BAD_WEBHOOKS[0][1], True)


STACK_CASES = _only(CLI_INVALID, CLI_STACK_CONFIG)


@pytest.mark.parametrize(
    ("raw", "path", "fix"), [c[1:] for c in STACK_CASES], ids=[c[0] for c in STACK_CASES]
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


POLICY_CASES = _only(BAD_POLICY_CONFIG, CLI_POLICY_CONFIG)


@pytest.mark.parametrize(
    ("policy", "config", "named"), [c[1:] for c in POLICY_CASES], ids=[c[0] for c in POLICY_CASES]
)
def test_bad_policy_config(
    dev: StackRun, tmp_path: Path, policy: str, config: dict[str, Any], named: str, report: Report
) -> None:
    _use_config(dev, _dev_config())
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


PLAINTEXT_CLI = _only(PLAINTEXT_CASES, CLI_PLAINTEXT)


@pytest.mark.parametrize(
    ("key", "value", "named"), [c[1:] for c in PLAINTEXT_CLI], ids=[c[0] for c in PLAINTEXT_CLI]
)
def test_plaintext_credentials_are_refused(
    dev: StackRun, key: str, value: str, named: str, report: Report
) -> None:
    if key == "trainstack:training":
        raw = _dev_config()
        _use_config(dev, {**raw, key: {**raw[key], **json.loads(value)}})
    else:
        _use_config(dev, _dev_config())
        dev.cli.run("config", "set", "--plaintext", "--stack", dev.stack, key, value)
    before = _mutations(dev.runpod)
    result = dev.up(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert named in output and "Traceback" not in output, output
    assert CANARY_HF not in output and value not in output, output
    assert _mutations(dev.runpod) == before
    _use_config(dev, _dev_config())
    report.record(
        "secrets: secret keys in plain text, a token in training.command",
        f"{len(PLAINTEXT_CLI)} refused before anything was created, naming the key path; the value in 0 "
        "messages; 0 mutating calls",
        [],
        [],
        len(PLAINTEXT_CLI),
    )


def test_bad_stack_name_is_refused_before_anything_is_rented(dev: StackRun, report: Report) -> None:
    _use_config(dev, _dev_config())
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


# Issue #34, class 5: a webhook URL the aggregator would refuse, set with --secret, is refused at preview.
WEBHOOK_CASES = _only(BAD_WEBHOOKS, CLI_WEBHOOKS)


@pytest.mark.parametrize("url", [c[1] for c in WEBHOOK_CASES], ids=[c[0] for c in WEBHOOK_CASES])
def test_a_webhook_url_the_aggregator_would_refuse_is_refused_at_preview(dev: StackRun, url: str) -> None:
    raw = _dev_config()
    training = dict(raw["trainstack:training"])
    training["secrets"] = [*training.get("secrets", []), "ALERT_WEBHOOK_URL"]
    _use_config(dev, {**raw, "trainstack:training": training})
    key = WEBHOOK_KEY
    dev.cli.run("config", "set", "--secret", "--stack", dev.stack, key, url)
    before = _mutations(dev.runpod)
    try:
        result = dev.preview(check=False)
    finally:
        dev.cli.run("config", "rm", "--stack", dev.stack, key)
        _use_config(dev, raw)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert key in output and "Traceback" not in output, output
    assert "CANARYWEBHOOK" not in output, output
    assert _mutations(dev.runpod) == before
