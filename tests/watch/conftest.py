"""The watch's unit tests reach no node: a test that reads exit records over SSH passes its own `run`."""

from __future__ import annotations

import pytest

from stackview import sources

REAL_EXIT_RECORDS = sources.exit_records


@pytest.fixture(autouse=True)
def _no_exit_records_over_ssh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "exit_records", lambda stack, outputs, pod_ids, run: {})
