"""A missing secret's message names every missing secret, each with its own `pulumi config set --secret`
line (issue #49, class 6): declared env secrets (HF_TOKEN), the S3 credentials a bucket needs, the registry
password; beside any other problem of the config, in one message."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackconfig import files
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config

S3 = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def _dev(**training: Any) -> dict[str, Any]:
    raw = copy.deepcopy(files.without_secrets(files.read_config("dev")))
    raw["trainstack:training"] = {**raw["trainstack:training"], **training}
    return raw


def _message(raw: dict[str, Any], given: frozenset[str] = frozenset()) -> str:
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, has_secret=lambda name: name in given)
    return str(caught.value)


def _set_line(name: str, value: str = "<value>") -> str:
    return f"`pulumi config set --secret trainstack:secrets.{name} {value}`"


def test_the_issue_example_a_declared_hf_token_and_the_bucket_credentials_are_all_named() -> None:
    """dev declaring HF_TOKEN instead of the S3 credentials, no secret set: all three, each with its line."""
    message = _message(_dev(secrets=["HF_TOKEN"]))
    for name in (*S3, "HF_TOKEN"):
        assert _set_line(name) in message, message
    assert "trainstack:secrets.HF_TOKEN: has no value" in message


def test_every_declared_secret_without_a_value_is_named() -> None:
    message = _message(_dev(secrets=[*S3, "HF_TOKEN", "WANDB_API_KEY"]), frozenset({"AWS_ACCESS_KEY_ID"}))
    assert message.startswith("3 problem(s)"), message
    for name in ("AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "WANDB_API_KEY"):
        assert f"trainstack:secrets.{name}: has no value; set it with {_set_line(name)}" in message
    assert "AWS_ACCESS_KEY_ID" not in message


def test_missing_secrets_are_named_beside_other_problems() -> None:
    raw = _dev(secrets=["HF_TOKEN"])
    raw["trainstack:cluster"] = {**raw["trainstack:cluster"], "nodes": "eight"}
    message = _message(raw)
    assert "trainstack:cluster.nodes" in message and _set_line("HF_TOKEN") in message


def test_the_registry_password_is_named_with_the_rest() -> None:
    raw = _dev(secrets=[*S3, "HF_TOKEN"])
    raw["trainstack:cluster"] = {**raw["trainstack:cluster"], "registry_auth": {"name": "r", "username": "u"}}
    message = _message(raw, frozenset(S3))
    assert _set_line("HF_TOKEN") in message and _set_line("REGISTRY_PASSWORD", "<password>") in message


def test_all_set_is_no_problem_and_without_the_check_nothing_is_asked() -> None:
    load_stack_config(_dev(secrets=[*S3, "HF_TOKEN"]), has_secret=lambda _name: True)
    load_stack_config(_dev(secrets=[*S3, "HF_TOKEN"]))  # files.load, scripts/forecast: values never read


def test_a_hostile_name_is_left_to_the_name_validator_never_echoed_as_a_command() -> None:
    message = _message(_dev(secrets=[*S3, "x`; rm -rf ~`", "HF_TOKEN"]), frozenset(S3))
    assert _set_line("HF_TOKEN") in message
    assert "set --secret trainstack:secrets.x" not in message


names = st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True), max_size=6, unique=True)


@given(declared=names, given_names=names)
def test_over_generated_declarations_every_unset_secret_has_its_line(
    declared: list[str], given_names: list[str]
) -> None:
    raw = _dev(secrets=[*S3, *[n for n in declared if n not in S3]])
    present = frozenset(given_names)
    try:
        load_stack_config(raw, has_secret=lambda name: name in present)
        message = ""
    except ConfigError as exc:
        message = str(exc)
    for name in raw["trainstack:training"]["secrets"]:
        assert (_set_line(name) in message) == (name not in present), (name, message)
