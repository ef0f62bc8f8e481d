"""What the program refuses before registering anything: bad stack names, credentials in plain text, and a
run forecast over the run's one cost cap."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.guards import plaintext_problems, run_cost_problems, stack_name_problems
from stackconfig.config import ConfigError
from stackconfig.credentials import SHAPES, credential_kind, find_credentials, mask
from stackconfig.image_ref import image_reference_problem
from stackconfig.loader import load_stack_config

# Canary credentials in each documented shape (not real: made-up characters in the issuers' formats).
CANARIES = {
    "Hugging Face token": "hf_" + "Q" * 34,
    "GitHub token": "ghp_" + "A1b2" * 9,
    "AWS access key id": "AKIA" + "Z7Y6X5W4V3U2T1S0",
    "RunPod API key": "rpa_" + "K" * 40,
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...\n-----END OPENSSH PRIVATE KEY-----",
    "credential assigned to a secret-named variable": "WANDB_API_KEY=" + "0123456789abcdef" * 2 + "01234567",
}


@pytest.mark.parametrize("stack", ["Dev_Red", "prod.eu", "", "-dev", "dev\n", "DEV"])
def test_bad_stack_names_are_refused(stack: str) -> None:
    problems = stack_name_problems(stack)
    assert problems and "lowercase letters, digits and '-'" in str(problems[0])


@pytest.mark.parametrize("stack", ["dev", "prod", "search", "local-cpu", "dev-red-2"])
def test_good_stack_names_pass(stack: str) -> None:
    assert stack_name_problems(stack) == []


@pytest.mark.parametrize(("kind", "value"), sorted(CANARIES.items()))
def test_each_documented_shape_is_found(kind: str, value: str) -> None:
    assert credential_kind(value) == kind
    assert credential_kind(f"--flag {value} --other") == kind
    assert {shape.kind for shape in SHAPES} == set(CANARIES)


@pytest.mark.parametrize(
    "value",
    [
        "train/train.py",
        "--tokenizer=meta-llama/Llama-3-8B",
        "--max_tokens=4096",
        "--revision=0123456789abcdef0123456789abcdef01234567",  # a git commit, W&B-key-shaped
        "runpod/pytorch@sha256:" + "a" * 64,
        "HF_TOKEN={{ RUNPOD_SECRET_trainstack-prod-hf_token }}",
        "WANDB_API_KEY=$WANDB_API_KEY",
        "https://api.runpod.io",
    ],
)
def test_ordinary_values_are_not_credentials(value: str) -> None:
    assert credential_kind(value) is None


def test_secret_keys_in_plain_text_are_refused_by_name() -> None:
    token = CANARIES["Hugging Face token"]
    config = {
        "trainstack:secrets.HF_TOKEN": token,
        "trainstack:secrets.WANDB_API_KEY": "enc-secret-value",
        "runpod:apiKey": "plain-api-key",
        "runpod:apiUrl": "https://api.runpod.io",
    }
    secret = {"trainstack:secrets.WANDB_API_KEY"}
    problems = plaintext_problems(config, secret.__contains__)
    assert [p.path for p in problems] == ["runpod:apiKey", "trainstack:secrets.HF_TOKEN"]
    assert all("pulumi config set --secret" in p.message for p in problems)
    assert token not in str(problems) and "plain-api-key" not in str(problems)


def test_credentials_in_other_config_are_refused_with_the_path_only() -> None:
    token = CANARIES["Hugging Face token"]
    training = {"command": ["train/train.py", f"--hf-token={token}"], "secrets": ["AWS_ACCESS_KEY_ID"]}
    config = {
        "trainstack:training": json.dumps(training),
        "trainstack:cluster": json.dumps({"env": {CANARIES["GitHub token"]: "x"}}),
        "trainstack:s3EndpointUrl": "http://127.0.0.1:9000",
        "other:note": CANARIES["AWS access key id"],
        "trainstack:secrets.GH": CANARIES["GitHub token"],  # a secret: allowed, not scanned
    }
    problems = plaintext_problems(config, {"trainstack:secrets.GH"}.__contains__)
    assert [p.path for p in problems] == [
        "other:note",
        "trainstack:cluster.env.<key>",
        "trainstack:training.command[1]",
    ]
    text = str([str(p) for p in problems])
    assert not any(value in text for value in CANARIES.values())
    assert "Hugging Face token" in text and "trainstack:training.secrets" in text


def test_find_credentials_walks_nested_values() -> None:
    value = {"a": [{"b": "x"}, {"c": CANARIES["private key"]}]}
    assert list(find_credentials(value, "k")) == [("k.a[1].c", "private key")]


def test_mask_keeps_three_characters() -> None:
    assert mask("hf_abcdefgh") == "hf_… (11 characters)" and mask("abc") == "…"


@pytest.mark.parametrize(
    "ref",
    [
        "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
        "localhost:5000/team/img:v1",
        "registry.example.com:5000/a/b_c/d-e:1.0",
        "ubuntu@sha256:" + "0" * 64,
        "docker.io/library/ubuntu:22.04@sha256:" + "f" * 64,
    ],
)
def test_valid_image_references(ref: str) -> None:
    assert image_reference_problem(ref) is None


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("runpod/pytorch:2.4.0 ;reboot", "its tag"),
        ("runpod/pytorch:", "its tag"),
        ("runpod/pytorch:.bad", "its tag"),
        ("RunPod/pytorch:1", "lowercase"),
        ("a//b:1", "lowercase"),
        ("bad_host:99x/a:1", "registry host"),
        ("img:1@sha256:123", "its digest"),
        ("", "lowercase"),
    ],
)
def test_invalid_image_references(ref: str, words: str) -> None:
    problem = image_reference_problem(ref)
    assert problem is not None and words in problem and "[registry[:port]/]name" in problem


# ---- the run's one cost cap, before the first resource (issue #34, class 2) -----------------------------

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def _stack(name: str, **sections: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(
        yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text())["config"]
    )
    for section, values in sections.items():
        raw.setdefault(f"trainstack:{section}", {}).update(values)
    return raw


def _no_model(raw: dict[str, Any]) -> dict[str, Any]:
    del raw["trainstack:training"]["model"]
    return raw


# (case, raw config, key refused or None, words in the message). Forecast run costs: dev $4.34
# (0.14 h x $31.93/h), prod $3,859.29 (15.1 h x $255.63/h), dev without a model $63.86 (2 h x $31.93/h).
RUN_CAP_CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("dev at its shipped cap ($100)", _stack("dev"), None, ""),
    (
        "dev with no cap (0) at 100 x the tokens",
        _stack(
            "dev",
            run={"max_cost_usd": 0},
            training={"model": {**_stack("dev")["trainstack:training"]["model"], "tokens": 2.0e9}},
        ),
        None,
        "",
    ),
    ("dev under its cap", _stack("dev", run={"max_cost_usd": 6}), None, ""),
    ("dev at its cap to the cent", _stack("dev", run={"max_cost_usd": 4.34}), None, ""),
    (
        "dev a cent over",
        _stack("dev", run={"max_cost_usd": 4.33}),
        "trainstack:run.max_cost_usd",
        "about $4.34 (forecast: 0.1 h of training), $0.01 over this cap of $4.33",
    ),
    (
        "dev at 100 x the tokens",
        _stack(
            "dev",
            run={"max_cost_usd": 100},
            training={"model": {**_stack("dev")["trainstack:training"]["model"], "tokens": 2.0e9}},
        ),
        "trainstack:run.max_cost_usd",
        "over this cap of $100.00",
    ),
    (
        "prod under the one cap",
        _stack("prod", run={"max_cost_usd": 5000}),
        None,
        "",
    ),
    (
        "prod over a $1,000 cap",
        _stack("prod", run={"max_cost_usd": 1000}),
        "trainstack:run.max_cost_usd",
        "about $3,859.29 (forecast: 15.1 h of training), $2,859.29 over this cap of $1,000.00",
    ),
    (
        "no model: $/h x max_run_hours over the cap",
        _no_model(_stack("dev", run={"max_cost_usd": 50})),
        "trainstack:run.max_cost_usd",
        "about $63.86 ($/h x max_run_hours (2 h; no training.model to forecast))",
    ),
    # The supervisor releases a run over its cap through these phases: that update is never refused.
    (
        "releasing a run over its cap",
        _stack("prod", run={"max_cost_usd": 1000, "phase": "releasing"}),
        None,
        "",
    ),
    ("released, over the cap", _stack("prod", run={"max_cost_usd": 1000, "phase": "released"}), None, ""),
    (
        "recovering an admitted run",
        _stack("prod", run={"max_cost_usd": 1000, "phase": "recovering"}),
        None,
        "",
    ),
    ("no model, under the cap", _no_model(_stack("dev", run={"max_cost_usd": 64})), None, ""),
    (
        "only the deprecated alerts.budget_usd",
        _stack("dev", alerts={"budget_usd": 1}, run={"max_cost_usd": 0}),
        "trainstack:alerts.budget_usd",
        "over this cap of $1.00",
    ),
    (
        "run.max_cost_usd wins over alerts.budget_usd",
        _stack("dev", alerts={"budget_usd": 1}, run={"max_cost_usd": 10}),
        None,
        "",
    ),
]


@pytest.mark.parametrize(
    ("raw", "key", "words"), [c[1:] for c in RUN_CAP_CASES], ids=[c[0] for c in RUN_CAP_CASES]
)
def test_the_run_forecast_is_held_to_the_one_cap(raw: dict[str, Any], key: str | None, words: str) -> None:
    problems = run_cost_problems(load_stack_config(raw))
    if key is None:
        assert problems == []
        return
    assert [p.path for p in problems] == [key]
    assert words in problems[0].message, problems[0].message
    assert "pulumi config set --path trainstack:run.max_cost_usd <usd>" in problems[0].message


# The one hourly price over the declared account limit is refused while the config is read, before any guard
# or resource (stackconfig/rules.py): prod is $255.63/h, search $127.71/h.
SPEND_LIMIT_CASES = [
    (
        "prod over the default $80/h",
        _stack("prod") | {"trainstack:runpod_spend_limit_per_hour": 80},
        "$255.63/h",
    ),
    ("prod a dollar short", _stack("prod") | {"trainstack:runpod_spend_limit_per_hour": 255}, "$255.63/h"),
    ("search over $100/h", _stack("search") | {"trainstack:runpod_spend_limit_per_hour": 100}, "$127.71/h"),
    (
        "dev at 3 pods over $80/h",
        _stack("dev", cluster={"nodes": 3}),
        "$95.78/h",
    ),
]


@pytest.mark.parametrize(
    ("raw", "words"), [c[1:] for c in SPEND_LIMIT_CASES], ids=[c[0] for c in SPEND_LIMIT_CASES]
)
def test_the_hourly_price_over_the_spend_limit_is_refused_while_reading(
    raw: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw)
    assert [p.path for p in err.value.problems] == ["trainstack:runpod_spend_limit_per_hour"]
    assert words in str(err.value), str(err.value)


@pytest.mark.parametrize("name", ["dev", "prod", "search", "local-cpu"])
def test_the_shipped_limits_hold_their_stacks(name: str) -> None:
    assert run_cost_problems(load_stack_config(_stack(name))) == []
