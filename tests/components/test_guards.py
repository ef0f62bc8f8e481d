"""What the program refuses before registering anything: bad stack names and credentials in plain text."""

from __future__ import annotations

import json

import pytest

from components.guards import plaintext_problems, stack_name_problems
from stackconfig.credentials import SHAPES, credential_kind, find_credentials, mask
from stackconfig.image_ref import image_reference_problem

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
