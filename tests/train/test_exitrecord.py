"""The exit record's contract (train/node/exitrecord.py): written once by the start script, read by watch
and the supervisor; the reader never trusts it and the writer never leaks a secret."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from train.node import exitrecord as er


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        "RUNPOD_POD_ID": "pod-a",
        "NODE_RANK": "1",
        "TRAINSTACK_POD_INDEX": "1",
        "TRAINSTACK_JOB": "train",
        "TRAINSTACK_RUN_ID": "run-1",
        "TRAINSTACK_SECRET_NAMES": "HF_TOKEN",
        "HF_TOKEN": "s3cr3t-value-xyz",
        "TRAINSTACK_STOP_FILE": str(tmp / "stop"),
    }
    env.update(extra)
    return env


def test_failed_preflight_is_written_and_read_back(tmp_path: Path) -> None:
    log = tmp_path / "start.log"
    log.write_text(
        "".join(f"line {i}\n" for i in range(40))
        + "token=s3cr3t-value-xyz here\n"
        + "/workspace/trainstack/start-node-0.sh: line 243: torchrun: command not found\n"
        + "[trainstack 05:22:49 node 0] FATAL: preflight failed (exit 127); see above\n"
    )
    env = _env(tmp_path)
    rec = er.build(env, 1, "preflight", "preflight failed (exit 127); see above", log, 100.0)
    said = er.write(rec, tmp_path / "metrics", env)
    path = tmp_path / "metrics" / "exit-node-1.pod-a.json"
    assert said == [f"exit record: {path}"]
    back = er.parse(path.read_text())
    assert back is not None
    assert (back.status, back.phase, back.exit_status, back.rank) == ("failed", "preflight", 1, 1)
    assert back.log_tail[-1].endswith("FATAL: preflight failed (exit 127); see above")
    assert "torchrun: command not found" in back.log_tail[-2]
    assert len(back.log_tail) == er.TAIL_LINES
    assert "s3cr3t" not in path.read_text()


def test_status_follows_exit_and_stop(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert er.build(env, 0, "finish", "", None, 1.0).status == "finished"
    assert er.build(env, 0, "preflight", "", None, 1.0).status == "failed"  # ended before training: not a run
    assert er.build(env, 143, "training", "", None, 1.0).status == "stopped"
    (tmp_path / "stop").touch()
    assert er.build(env, 0, "training", "", None, 1.0).status == "stopped"


@given(st.one_of(st.text(), st.binary(), st.dictionaries(st.text(), st.integers() | st.text() | st.none())))
def test_parse_never_raises_on_junk(doc: object) -> None:
    assert er.parse(doc) is None or isinstance(er.parse(doc), er.ExitRecord)


@given(st.text(max_size=2000))
def test_parsed_tail_is_bounded_and_clean(line: str) -> None:
    doc = {"version": 1, "status": "failed", "phase": "training", "exit_status": 1, "log_tail": [line] * 50}
    rec = er.parse(json.dumps(doc))
    assert rec is not None
    assert len(rec.log_tail) <= er.TAIL_LINES
    assert all(len(x) <= er.TAIL_CHARS and "\x1b" not in x for x in rec.log_tail)
