"""A forecast that cannot hold, refused by the program itself: `__main__.py` under Pulumi mocks, as a preview
and as `pulumi up --skip-preview` hands it over (issues #17, #34).

These are the cases tests/e2e/test_forecast_policies.py ran through the real CLI one command each; the
refusals are our Python (components/guards.py, stackconfig/model.py), raised as a `pulumi.RunError` before
the first resource registers. That file keeps one real command per path, for what only the engine shows
(the CLI prints the error without a traceback, fails the command, and RunPod sees no mutating call).
"""

from __future__ import annotations

import copy
import runpy
from collections.abc import Iterator
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import pytest

from tests.components.test_bad_input import DEV_CONFIG, DEV_SECRETS, PROGRAM, engine_config
from tests.components.test_cluster import FakeProviders
from tests.stackconfig.test_model import INVALID

BAD = [c for c in INVALID if c[0] in ("zero-parameters", "heads-not-dividing", "lora-no-fraction")]

# Issue #34, class 2: `pulumi up --skip-preview` runs no stack policy before the resources exist, so what must
# stop a rental is refused by the program itself before the first resource registers.
SKIP_PREVIEW = [
    ("absurd mfu", {"mfu": 4.4e-309}, "trainstack:training.model.mfu"),
    ("mfu above any published run, no overhead", {"mfu": 1.0, "overhead": 0}, "above the best published"),
    ("parameters true", {"parameters": True}, "trainstack:training.model.parameters"),
    ("1e200 tokens", {"tokens": 1e200}, "trainstack:training.model.tokens"),
]


@pytest.fixture
def program(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The runtime config is process-wide (context variables): put back what the test found."""
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")  # __main__.py sets it; undone after
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    config, secret_keys = runtime_config.CONFIG.get(), runtime_config._SECRET_KEYS.get()
    yield
    runtime_config.set_all_config(config, list(secret_keys))


def with_model(model: dict[str, Any]) -> dict[str, Any]:
    """dev's committed config with its model section updated, as the e2e file's `_use_model` writes it."""
    raw = copy.deepcopy(DEV_CONFIG)
    raw["trainstack:training"]["model"].update(model)
    return raw


def refusal(raw: dict[str, Any], preview: bool) -> str:
    """Run `__main__.py` on dev with `raw` as its stack file's config; the refusal's text, after checking it
    is one the CLI prints without a traceback (a RunError with its cause cut off) and that nothing was
    registered first, so nothing could be created."""
    runtime_config.set_all_config({**engine_config(raw), **DEV_SECRETS}, list(DEV_SECRETS))
    fake = FakeProviders()
    pulumi.runtime.set_mocks(fake, project="trainstack", stack="dev", preview=preview)
    raised: list[BaseException] = []

    @pulumi.runtime.test
    def run() -> None:
        try:
            runpy.run_path(str(PROGRAM))
        except pulumi.RunError as err:
            raised.append(err)

    run()
    assert raised, "the program registered its resources instead of refusing"
    error = raised[0]
    assert error.__cause__ is None and error.__suppress_context__
    assert fake.resources == []
    message = str(error)
    assert message.startswith("stacks/Pulumi.dev.yaml: ") and "Traceback" not in message, message
    return message


@pytest.mark.parametrize(("raw", "key", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_model_section_is_refused_at_preview_with_its_key(
    program: None, raw: dict[str, Any], key: str, words: str
) -> None:
    message = refusal(with_model(raw["trainstack:training"]["model"]), preview=True)
    assert f"trainstack:training.model.{key}" in message and words in message, message


@pytest.mark.parametrize(("what", "model", "words"), SKIP_PREVIEW, ids=[c[0] for c in SKIP_PREVIEW])
def test_up_with_skip_preview_refuses_a_forecast_that_cannot_hold(
    program: None, what: str, model: dict[str, Any], words: str
) -> None:
    message = refusal(with_model(model), preview=False)  # an update: no policy has run
    assert words in message, (what, message)
