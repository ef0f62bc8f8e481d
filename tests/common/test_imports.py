"""common/imports.py: the collector is off for the block, on again after (as it was), and what the block
made is frozen out of later passes, also when the block raises."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from common.imports import collector_paused


@pytest.fixture
def unfrozen() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()  # give the test process's objects back to the collector
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_paused_for_the_block_and_what_it_made_is_frozen(unfrozen: None) -> None:
    gc.enable()
    gc.unfreeze()
    made: list[list[int]] = []
    with collector_paused():
        assert not gc.isenabled()
        made += [[i] for i in range(10_000)]  # container objects: what the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)
    tracked = {id(obj) for obj in gc.get_objects()}  # every generation a pass walks; not the frozen
    assert not any(id(m) in tracked for m in made)


def test_a_collector_that_was_off_stays_off_and_a_raise_still_freezes(unfrozen: None) -> None:
    gc.disable()
    gc.unfreeze()
    with pytest.raises(ImportError), collector_paused():
        raise ImportError("no such module")
    assert not gc.isenabled()
    assert gc.get_freeze_count() > 0
