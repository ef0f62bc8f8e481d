"""scripts/status (supervisor/status.py): every stack one line, from its outputs and its supervisor's
heartbeat, with fakes for Pulumi and the bucket; an unreadable stack is a line, never the listing's end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import formatdate
from io import BytesIO
from pathlib import Path
from typing import Any, ClassVar

import pytest

from supervisor import status
from tests.supervisor.test_round import OUTPUTS, config_of

T0 = 1_800_000_000.0


class Bucket:
    """get_object of one heartbeat, written `age_s` before the bucket's own Date."""

    def __init__(self, beat: dict[str, Any] | None, age_s: float) -> None:
        self.beat, self.age_s = beat, age_s

    def get_object(self, **_kw: Any) -> dict[str, Any]:
        if self.beat is None:
            raise _Missing()
        return {
            "Body": BytesIO(json.dumps(self.beat).encode()),
            "LastModified": datetime.fromtimestamp(T0 - self.age_s, UTC),
            "ResponseMetadata": {"HTTPHeaders": {"date": formatdate(T0, usegmt=True)}},
        }


class _Missing(Exception):
    response: ClassVar[dict[str, Any]] = {"Error": {"Code": "NoSuchKey"}}


def row(
    tmp_path: Path, outputs: dict[str, Any], beat: dict[str, Any] | None, age_s: float
) -> status.StackStatus:
    raw = config_of("bkt")
    bucket = Bucket(beat, age_s)
    return status.status_of("dev", tmp_path, read=lambda _w, _s: (outputs, raw), s3_of=lambda _c: bucket)


def test_each_stack_is_one_line_with_its_heartbeat(tmp_path: Path) -> None:
    beat = {"state": "training", "spent_usd": 12.5, "interval_s": 300, "done": []}
    live = row(tmp_path, OUTPUTS, beat, 40)
    assert (live.state, live.nodes, live.usd_per_hour, live.spent_usd) == ("training", 1, 31.92, 12.5)
    assert live.heartbeat_age_s == pytest.approx(40) and not live.silent
    assert "heartbeat 40 s ago" in live.line() and "SILENT" not in live.line()
    quiet = row(tmp_path, OUTPUTS, beat, 700)
    assert quiet.silent and quiet.line().endswith("SILENT")
    assert row(tmp_path, OUTPUTS, None, 0).silent  # compute up, no supervisor ever: unguarded
    ended = row(tmp_path, {**OUTPUTS, "nodes": []}, {**beat, "state": "finished", "done": ["release"]}, 9000)
    assert ended.state == "released" and not ended.silent and ended.usd_per_hour == 0.0


def test_a_stack_that_cannot_be_read_is_a_line_and_the_listing_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_w: Path, _s: str) -> Any:
        raise RuntimeError("pulumi: passphrase")

    bad = status.status_of("prod", tmp_path, read=broken)
    assert bad.state == "unreadable" and "passphrase" in bad.why
    assert status.status_of("dev", None).state == "not up here"
    why = status.status_of("dev", "the local RunPod is not running")  # what the workspace lookup said
    assert why.state == "not up here" and why.line().endswith("(the local RunPod is not running)")
    assert status.main([], workspace_of=lambda _s: None, names=lambda: ["dev", "prod"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["dev", "prod"] and all("not up here" in ln for ln in lines)
    assert "dev" in status.stack_names()
