"""The forecast through the real CLI: its policies refuse a plan that cannot work, nothing is created, and a
bad model section is refused with its key path (issue #17)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import yaml

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO
from tests.components.test_forecast_refusals import BAD, SKIP_PREVIEW
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e
MUTATING = ("POST ", "PATCH ", "PUT ", "DELETE ")
SHIPPED: dict[str, Any] = yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, runpod: LocalRunPod, moto_s3: str) -> Iterator[StackRun]:
    runpod.admin.reset()
    yield open_stack("dev", tmp_path_factory.mktemp("forecast"), runpod, moto_s3, policy=True)
    runpod.admin.reset()


def _mutations(runpod: LocalRunPod) -> dict[str, Any]:
    endpoints = runpod.admin.counters()["endpoints"]
    return {
        e: c for e, c in endpoints.items() if e.startswith(MUTATING) and not e.startswith("POST /graphql")
    }


def _use_model(run: StackRun, model: dict[str, Any] | None) -> None:
    config = copy.deepcopy(SHIPPED)
    if model is None:
        del config["trainstack:training"]["model"]
    else:
        config["trainstack:training"]["model"].update(model)
    stack_file = run.cli.project / "stacks" / f"Pulumi.{run.stack}.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    # the shipped config, with the workspace's encrypted secret values (dev's AWS keys) kept
    kept = {k: v for k, v in (doc.get("config") or {}).items() if k.startswith("trainstack:secrets.")}
    doc["config"] = config | kept
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _assert_nothing_created(run: StackRun, before: dict[str, Any]) -> None:
    assert _mutations(run.runpod) == before
    assert all(not r["type"].startswith("pulumi-python") for r in run.cli.resources())


@pytest.mark.parametrize(
    ("policy", "model", "words"),
    [
        # Llama-3-8B unsharded with AdamW: 16 bytes x 8e9 = 128 GB of states alone on an 80 GB H100.
        (
            "model-fits-gpu-memory",
            {"sharding": "ddp"},
            [
                "the model needs",
                "weights 16.1 GB + gradients 16.1 GB + optimizer 96.4 GB",
                "Cheapest fix: shard",
            ],
        ),
    ],
)
def test_mandatory_forecast_policy_refuses_the_preview(
    dev: StackRun, policy: str, model: dict[str, Any], words: list[str]
) -> None:
    before = _mutations(dev.runpod)
    _use_model(dev, model)
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert policy in output and "mandatory" in output, output
    for text in words:
        assert text in output, output
    _assert_nothing_created(dev, before)


def test_a_run_over_the_one_cap_is_refused_at_preview_naming_the_cap(dev: StackRun) -> None:
    """100 x dev's tokens: ~15 h on 8 H100s, ~$470 against dev's one cap of $100 (trainstack:run.max_cost_usd
    in its stack file). The program refuses it before the first resource registers, so the preview fails
    with the cap's key and the fix, whichever way the plan is run (tests/components/test_guards.py); the
    run-cost-within-budget policy holds the same cap (tests/policy/test_run_cap.py)."""
    before = _mutations(dev.runpod)
    _use_model(dev, {"tokens": 2.0e9})
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "trainstack:run.max_cost_usd" in output and "over this cap of $100.00" in output, output
    assert "Traceback" not in output, output
    _assert_nothing_created(dev, before)


def test_a_longer_run_is_advised_and_a_stack_without_a_model_gets_a_note(dev: StackRun) -> None:
    before = _mutations(dev.runpod)
    # 17 x dev's tokens: ~2.5 h against dev's 2 h watchdog (1 restart), ~$80 of dev's $100 budget.
    _use_model(dev, {"tokens": 3.4e8})
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "run-fits-max-hours" in output and "advisory" in output and "time(s)" in output, output

    _use_model(dev, None)
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "declares no trainstack:training.model" in output, output
    assert "model-fits-gpu-memory" not in output and "run-cost-within-budget" not in output
    _assert_nothing_created(dev, before)


# One bad model section through the real CLI: every case of tests/components/test_forecast_refusals.py is
# refused by the program before anything registers; what this adds is the engine's side (the command fails,
# the message printed without a traceback, nothing created). Issue #47: each case was a real preview here.
ONE_BAD = BAD[:1]


@pytest.mark.parametrize(("raw", "key", "words"), [c[1:] for c in ONE_BAD], ids=[c[0] for c in ONE_BAD])
def test_bad_model_section_is_refused_at_preview_with_its_key(
    dev: StackRun, raw: dict[str, Any], key: str, words: str
) -> None:
    before = _mutations(dev.runpod)
    _use_model(dev, raw["trainstack:training"]["model"])
    result = dev.preview(check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"trainstack:training.model.{key}" in output and words in output, output
    assert "Traceback" not in output, output
    _assert_nothing_created(dev, before)


# Issue #34, class 2: `pulumi up --skip-preview` runs no stack policy before the resources exist, so what must
# stop a rental is refused by the program itself before the first resource registers. Each case of
# SKIP_PREVIEW is checked as a call (tests/components/test_forecast_refusals.py); one runs the real `up`.
ONE_SKIP_PREVIEW = SKIP_PREVIEW[:1]


@pytest.mark.parametrize(("what", "model", "words"), ONE_SKIP_PREVIEW, ids=[c[0] for c in ONE_SKIP_PREVIEW])
def test_up_with_skip_preview_creates_nothing_for_a_forecast_that_cannot_hold(
    dev: StackRun, what: str, model: dict[str, Any], words: str
) -> None:
    before = _mutations(dev.runpod)
    secrets_before = len(dev.runpod.admin.live()["secrets"])
    _use_model(dev, model)
    result = dev.up("--skip-preview", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert words in output and "Traceback" not in output, output
    _assert_nothing_created(dev, before)
    assert len(dev.runpod.admin.live()["secrets"]) == secrets_before, what


# Issue #34, class 2, the money checks: the run's one cost cap and the declared account spend limit hold under
# `pulumi up --skip-preview` too. prod (an 8-node Instant Cluster, its 2 TB volume, the checkpoint bucket and
# 4 secrets; $255.63/h, forecast run $3,859.29) against a local RunPod whose account may spend the stack's
# shipped $300/h: were the program not to refuse, all of it would be created before any policy ran.
PROD_BUCKET = "trainstack-prod-checkpoints"
OVER_THE_MONEY = [
    (
        "forecast run over trainstack:run.max_cost_usd",
        "trainstack:run",
        {"phase": "active", "max_cost_usd": 1000},
        ["trainstack:run.max_cost_usd", "about $3,859.29", "over this cap of $1,000.00"],
    ),
    (
        "hourly price over the declared spend limit",
        "trainstack:runpod_spend_limit_per_hour",
        80,
        ["trainstack:runpod_spend_limit_per_hour", "$255.63/h", "may spend $80/h"],
    ),
]


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, runpod: LocalRunPod, moto_s3: str) -> Iterator[StackRun]:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    yield open_stack("prod", tmp_path_factory.mktemp("forecast-prod"), runpod, moto_s3, policy=True)
    runpod.admin.reset()


@pytest.mark.parametrize(
    ("what", "key", "value", "words"), OVER_THE_MONEY, ids=[c[0] for c in OVER_THE_MONEY]
)
def test_up_with_skip_preview_creates_nothing_over_the_money_checks(
    prod: StackRun, moto_s3: str, what: str, key: str, value: Any, words: list[str]
) -> None:
    stack_file = prod.cli.project / "stacks" / f"Pulumi.{prod.stack}.yaml"
    shipped = stack_file.read_text()
    doc = yaml.safe_load(shipped)
    doc["config"][key] = value  # the encrypted secrets and their salt stay as they are
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    before = _mutations(prod.runpod)
    try:
        result = prod.up("--skip-preview", check=False)
    finally:
        stack_file.write_text(shipped)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    for text in words:
        assert text in output, output
    live = prod.runpod.admin.live()
    assert (live["pods"], live["clusters"], live["volumes"], live["secrets"]) == ([], [], [], []), what
    assert PROD_BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}, what
    _assert_nothing_created(prod, before)
