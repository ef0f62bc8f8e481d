"""One secret-name rule and one reference form, and the emulator reading references as RunPod does."""

from __future__ import annotations

import pytest

from emulator.world import SECRET_REF
from facts import secrets

NAMES = ["HF_TOKEN", "trainstack-prod-hf_token", "a", "x" * 64, "has.dot", "has space", "", "x" * 65, "ü"]


@pytest.mark.parametrize("name", NAMES)
def test_the_emulator_substitutes_exactly_the_names_we_accept(name: str) -> None:
    ours = bool(secrets.NAME_PATTERN.match(name))
    # The emulator has no length rule (RunPod's is the console's), so compare on the alphabet alone.
    if len(name) <= 64:
        assert (SECRET_REF.fullmatch(secrets.reference(name)) is not None) == ours


@pytest.mark.parametrize("name", [n for n in NAMES if secrets.NAME_PATTERN.match(n)])
def test_reference_round_trips(name: str) -> None:
    ref = secrets.reference(name)
    assert secrets.is_reference(ref) and secrets.is_reference(f"  {ref} ")
    match = secrets.REFERENCE_PATTERN.search(f"x={ref};")
    assert match is not None and match.group(1) == name
    assert SECRET_REF.sub("VALUE", f"x={ref};") == "x=VALUE;"


def test_a_value_with_more_than_a_reference_is_not_one() -> None:
    assert not secrets.is_reference("{{ RUNPOD_SECRET_A }} extra")
    assert secrets.contains_reference("prefix {{ RUNPOD_SECRET_A }}")
    assert not secrets.is_reference("{{ RUNPOD_SECRET_a.b }}")
