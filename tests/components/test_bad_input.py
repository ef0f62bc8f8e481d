"""Bad stack config refused by the program itself: `__main__.py` run under Pulumi mocks, its config given
exactly as the Pulumi CLI hands it over, each refusal naming the key and the fix, and nothing registered.

The refusals are all our Python (components/guards.py, read_stack_config, stackconfig/), raised as a
`pulumi.RunError` before the first resource. What only the engine shows (that the CLI prints that error
without a traceback, fails the command and calls nothing at RunPod, on preview and on up; that it marks
`--secret` keys secret) is kept in tests/e2e/test_bad_input.py, one real CLI run per path.
"""

from __future__ import annotations

import json
import logging
import runpy
from collections.abc import Iterator
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import pytest
import yaml

from stackconfig.slurm import SLURM_IMAGE_EXAMPLE
from tests.components.conftest import REPO
from tests.components.test_cluster import FakeProviders
from tests.stackconfig.test_config import INVALID

PROGRAM = REPO / "__main__.py"
DEV_CONFIG: dict[str, Any] = yaml.safe_load((REPO / "stacks/Pulumi.dev.yaml").read_text())["config"]
# What tests/e2e/stacks.py open_stack sets with `pulumi config set --secret` for dev (its bucket's keys).
DEV_SECRETS = {
    "trainstack:secrets.AWS_ACCESS_KEY_ID": "testing",
    "trainstack:secrets.AWS_SECRET_ACCESS_KEY": "testing",
}
INT64 = range(-(2**63), 2**64)  # what Go's YAML decoder reads as a number (uint64 at the top)


def engine_value(value: Any) -> str:
    """One stack-file value as the Pulumi CLI hands it to the program: text as it is, everything else as
    compact JSON with sorted keys; an integer no int64 holds arrives as its digits in a JSON string (Go's
    YAML decoder keeps it as text). tests/e2e/test_bad_input.py checks this against the CLI for every case."""
    if isinstance(value, str):
        return value
    return json.dumps(_go_yaml(value), separators=(",", ":"), sort_keys=True, allow_nan=False)


def _go_yaml(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _go_yaml(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_yaml(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value not in INT64:
        return str(value)
    return value


def engine_config(raw: dict[str, Any]) -> dict[str, str]:
    return {key: engine_value(value) for key, value in raw.items()}


def _json_safe(raw: dict[str, Any]) -> bool:
    try:
        json.dumps(raw, allow_nan=False)
    except ValueError:
        return False
    return True


# A NaN or infinite float inside a YAML object never reaches the program: the Pulumi CLI itself refuses the
# stack file ("json: unsupported value: NaN"). tests/stackconfig/test_config.py has those; "nan" as text is
# here.
CLI_INVALID = [c for c in INVALID if _json_safe(c[1])]

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

# Issue #34, class 5: webhook URLs the aggregator would refuse (or post the secret URL over in clear) are
# refused at preview, naming the key and never the value.
WEBHOOK_KEY = "trainstack:secrets.ALERT_WEBHOOK_URL"
BAD_WEBHOOKS = [
    ("no-scheme", "hooks.example.invalid/services/T0/B0/CANARYWEBHOOK"),
    ("file", "file:///CANARYWEBHOOK"),
    ("plain-http", "http://hooks.example.invalid/services/T0/B0/CANARYWEBHOOK"),
    ("user-and-password", "https://CANARYWEBHOOK:pw@hooks.example.invalid/services/T0/B0/x"),
    ("good-https", "https://hooks.example.invalid/services/T0/B0/x"),
]


@pytest.fixture
def program(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The runtime config is process-wide (context variables): put back what the test found."""
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")  # __main__.py sets it; undone after
    # The target is a real RunPod (delivery can reach the nodes), whatever RUNPOD_API_URL this process has.
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    config, secret_keys = runtime_config.CONFIG.get(), runtime_config._SECRET_KEYS.get()
    yield
    runtime_config.set_all_config(config, list(secret_keys))


def run_program(
    stack: str,
    raw: dict[str, Any],
    plaintext: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> tuple[FakeProviders, BaseException | None]:
    """Run `__main__.py` as `pulumi preview` would, on `raw` (the stack file's config section) plus
    `plaintext` and `secrets` (values given with `pulumi config set [--secret]`); the resources it
    registered and the error it raised, if any."""
    secret_values = {**DEV_SECRETS, **(secrets or {})}
    runtime_config.set_all_config(
        {**engine_config(raw), **(plaintext or {}), **secret_values}, list(secret_values)
    )
    fake = FakeProviders()
    pulumi.runtime.set_mocks(fake, project="trainstack", stack=stack, preview=True)
    raised: list[BaseException] = []

    @pulumi.runtime.test
    def run() -> None:
        try:
            runpy.run_path(str(PROGRAM))
        except pulumi.RunError as err:
            raised.append(err)

    run()
    return fake, (raised[0] if raised else None)


def _refused(fake: FakeProviders, error: BaseException | None, stack: str = "dev") -> str:
    """The refusal's text, after checking it is the one the CLI prints without a traceback (a RunError
    with its cause cut off) and that nothing was registered first (so nothing could be created)."""
    assert isinstance(error, pulumi.RunError), error
    assert error.__cause__ is None and error.__suppress_context__
    assert fake.resources == []
    message = str(error)
    assert message.startswith(f"stacks/Pulumi.{stack}.yaml: "), message
    return message


@pytest.mark.parametrize(
    ("raw", "path", "fix"), [c[1:] for c in CLI_INVALID], ids=[c[0] for c in CLI_INVALID]
)
def test_bad_stack_config(program: None, raw: dict[str, Any], path: str, fix: str) -> None:
    message = _refused(*run_program("dev", raw))
    assert path in message and fix in message, message


@pytest.mark.parametrize(
    ("key", "value", "named"), [c[1:] for c in PLAINTEXT_CASES], ids=[c[0] for c in PLAINTEXT_CASES]
)
def test_plaintext_credentials_are_refused(
    program: None, caplog: pytest.LogCaptureFixture, key: str, value: str, named: str
) -> None:
    caplog.set_level(logging.DEBUG)
    if key == "trainstack:training":
        raw = {**DEV_CONFIG, key: {**DEV_CONFIG[key], **json.loads(value)}}
        fake, error = run_program("dev", raw)
    else:
        fake, error = run_program("dev", DEV_CONFIG, plaintext={key: value})
    message = _refused(fake, error)
    assert named in message, message
    said = message + caplog.text  # what the program told the engine, which the CLI prints
    assert CANARY_HF not in said and value not in said, said


def test_bad_stack_name_is_refused_before_anything_is_rented(program: None) -> None:
    message = _refused(*run_program("Dev_Red", DEV_CONFIG), stack="Dev_Red")
    assert "lowercase letters, digits and '-'" in message, message


def test_dev_as_committed_registers_its_cluster(program: None) -> None:
    """The control for the cases above: the same run on dev's own config refuses nothing."""
    fake, error = run_program("dev", DEV_CONFIG)
    assert error is None
    assert "pulumi-python:dynamic/runpod:Pod" in {r.typ for r in fake.resources}


@pytest.mark.parametrize("url", [c[1] for c in BAD_WEBHOOKS], ids=[c[0] for c in BAD_WEBHOOKS])
def test_a_webhook_url_the_aggregator_would_refuse_is_refused_at_preview(
    program: None, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    caplog.set_level(logging.DEBUG)
    training = dict(DEV_CONFIG["trainstack:training"])
    training["secrets"] = [*training.get("secrets", []), "ALERT_WEBHOOK_URL"]
    fake, error = run_program(
        "dev", {**DEV_CONFIG, "trainstack:training": training}, secrets={WEBHOOK_KEY: url}
    )
    if url.startswith("https://hooks"):  # the good one: previews clean, so the refusals are the URL's
        assert error is None
        assert fake.resources, "the good URL's preview registered nothing"
        return
    message = _refused(fake, error)
    assert WEBHOOK_KEY in message, message
    assert "CANARYWEBHOOK" not in message + caplog.text, message


def test_a_slurm_stacks_default_job_name_obeys_the_64_character_rule(program: None) -> None:
    """Issue #62: a Slurm stack without `cluster.slurm.job` names its job after the stack, and a stack name of
    65-100 characters (a valid one) made a job name past Slurm's rule: refused before anything registers."""
    raw = yaml.safe_load((REPO / "stacks/Pulumi.local-cpu.yaml").read_text())["config"]
    raw["trainstack:cluster"] = {
        **raw["trainstack:cluster"],
        "scheduler": "slurm",
        "image": SLURM_IMAGE_EXAMPLE,
    }
    stack = "a" * 70
    message = _refused(*run_program(stack, raw), stack=stack)
    assert "trainstack:cluster.slurm.job: is not set, so the Slurm job takes the stack's name" in message
    assert (
        "at most 64 characters" in message
        and "pulumi config set --path trainstack:cluster.slurm.job" in message
    )
    _, error = run_program(
        stack, {**raw, "trainstack:cluster": {**raw["trainstack:cluster"], "slurm": {"job": "j"}}}
    )
    assert error is None or "cluster.slurm.job" not in str(error)
