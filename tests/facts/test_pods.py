"""PodStatus against RunPod's v2 spec, and every place that reasons about terminal pods."""

from __future__ import annotations

import json

import pytest

from emulator.config import default_spec_path
from facts.pods import PodStatus, is_halted, is_terminal
from providers.runpod.pod import FAILED_REASONS


@pytest.fixture(scope="module")
def spec_status() -> dict[str, object]:
    path = default_spec_path()
    if not path.is_file():
        pytest.skip(f"RunPod's v2 spec is not at {path}")
    schema: dict[str, object] = json.loads(path.read_text())["components"]["schemas"]["PodStatus"]
    return schema


def test_members_are_the_specs_enum(spec_status: dict[str, object]) -> None:
    assert [s.value for s in PodStatus] == spec_status["enum"]


def test_terminal_statuses_are_the_ones_the_spec_describes_as_stopped_failed_or_deleted(
    spec_status: dict[str, object],
) -> None:
    # The spec documents each status on one line: "- `EXITED` — container exited (stopped)".
    described = [line for line in str(spec_status["description"]).splitlines() if "`" in line]
    lines = {line.split("`")[1]: line.lower() for line in described}
    assert set(lines) == {s.value for s in PodStatus}
    for status in PodStatus:
        ends = any(word in lines[status.value] for word in ("exited", "error", "deleted"))
        assert status.is_terminal == ends, status


def test_halted_is_terminal_but_still_on_the_account() -> None:
    assert {s for s in PodStatus if s.is_halted} == {PodStatus.EXITED, PodStatus.ERROR}
    assert all(s.is_terminal for s in PodStatus if s.is_halted)


def test_raw_strings_and_undocumented_statuses() -> None:
    assert is_terminal("TERMINATED") and is_halted("EXITED")
    assert not is_terminal("RUNNING") and not is_halted("TERMINATED")
    assert not is_terminal("DEGRADED") and not is_halted("None")


def test_the_pod_provider_explains_every_terminal_status() -> None:
    assert set(FAILED_REASONS) == {s for s in PodStatus if s.is_terminal}
