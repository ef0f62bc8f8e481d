"""The preflight checks write how long each took into the health record (the goodput ledger's health time)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.torchvenv import VENV, needs

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, needs("python")]

# Two checks one after another on a lead rank, then one on a rank that writes nothing: each section carries
# the time since the previous check ended (the first: since the checks began).
SNIPPET = """
import argparse, sys, time
from pathlib import Path
from train.node.preflight import Ctx
ctx = Ctx(argparse.Namespace(record=Path(sys.argv[1])), 0, 1, 0, 0, False, "cpu")
ctx.since -= 30.0
ctx.record("straggler", {"status": "skipped"})
ctx.since -= 600.0
ctx.record("burn_in", {"status": "pass"})
other = Ctx(argparse.Namespace(record=Path(sys.argv[2])), 1, 2, 1, 0, False, "cpu")
other.record("straggler", {"status": "skipped"})
"""


def test_each_check_records_its_own_elapsed_seconds(tmp_path: Path) -> None:
    lead, other = tmp_path / "lead.json", tmp_path / "other.json"
    subprocess.run(
        [str(VENV / "bin" / "python"), "-c", SNIPPET, str(lead), str(other)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        timeout=120,
    )
    record = json.loads(lead.read_text())
    assert 30.0 <= record["straggler"]["elapsed_s"] < 600.0
    assert 600.0 <= record["burn_in"]["elapsed_s"] < 630.0  # from the straggler's end, not from the start
    assert not other.exists()  # only local rank 0 writes the node's record
