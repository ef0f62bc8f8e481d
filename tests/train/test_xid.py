"""XIDs by what fixes them (train/node/xid.py): each class goes where the table says, the docs print the same
table, and an unknown XID errs toward replace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from train.node import xid

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("code", [8, 13, 31, 43, 45, 68, 94])
def test_what_a_process_restart_clears_restarts_in_place(code: int) -> None:
    assert xid.action(code) == "restart"


@pytest.mark.parametrize("code", [48, 61, 62, 63, 64, 74, 79, 92, 95, 119, 120])
def test_what_needs_another_machine_is_replaced(code: int) -> None:
    assert xid.action(code) == "replace"


@pytest.mark.parametrize("code", [0, 1, 999, 154])
def test_an_unknown_xid_errs_toward_replace(code: int) -> None:
    assert code not in xid.TABLE and xid.action(code) == "replace"


def test_split_keeps_order() -> None:
    assert xid.split([79, 13, 999, 31]) == ([13, 31], [79, 999])


def test_docs_recovery_prints_the_table_of_the_code() -> None:
    text = (ROOT / "docs" / "RECOVERY.md").read_text()
    rows = dict(
        (int(code), action)
        for code, action in re.findall(r"^\| (\d+) \| (restart|replace) \|", text, flags=re.MULTILINE)
    )
    assert rows == {code: row[0] for code, row in xid.TABLE.items()}
    assert "docs.nvidia.com/deploy/xid-errors" in text
