"""The training-progress contract: what is accepted, what is refused (naming the field), the tail reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.node.progress import MAX_LINE_BYTES, ProgressError, ProgressTail, parse_line, progress_line

GOOD = {"v": 1, "time": 1764528000.5, "step": 1200, "step_time_s": 0.03, "samples_per_s": 2051.3, "loss": 2.9}


def test_a_full_line_parses() -> None:
    rec = parse_line(json.dumps(GOOD | {"tokens_per_s": 4.2e6, "lr": 3e-4}))  # unknown fields are ignored
    assert (rec.step, rec.step_time_s, rec.samples_per_s, rec.tokens_per_s, rec.loss, rec.time) == (
        1200,
        0.03,
        2051.3,
        4.2e6,
        2.9,
        1764528000.5,
    )


def test_minimal_line_with_tokens_only_and_null_loss() -> None:
    rec = parse_line('{"step": 0, "step_time_s": 1, "tokens_per_s": 10, "loss": null}')
    assert rec.samples_per_s is None and rec.loss is None and rec.time is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"step": -1}, "'step'"),
        ({"step": 1.5}, "'step'"),
        ({"step": True}, "'step'"),
        ({"step_time_s": 0}, "'step_time_s'"),
        ({"step_time_s": "fast"}, "'step_time_s'"),
        ({"samples_per_s": -3}, "'samples_per_s'"),
        ({"loss": "nan"}, "'loss'"),
        ({"v": 2}, "'v'"),
        ({"checkpoint_s": -1}, "'checkpoint_s'"),
        ({"checkpoint_s": "long"}, "'checkpoint_s'"),
    ],
)
def test_bad_field_is_refused_by_name(change: dict[str, object], field: str) -> None:
    with pytest.raises(ProgressError, match=field):
        parse_line(json.dumps(GOOD | change))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"step": 1, "loss": 1, "samples_per_s": 1}', "'step_time_s' is missing"),
        ('{"step": 1, "step_time_s": 1, "samples_per_s": 1}', "'loss' is missing"),
        ('{"step": 1, "step_time_s": 1, "loss": 1}', "neither 'samples_per_s' nor 'tokens_per_s'"),
        ("[1, 2]", "not a JSON object"),
        ("step 1 loss 2", "not JSON"),
        ('{"step": 1, "pad": "' + "x" * MAX_LINE_BYTES + '"}', "longer than"),
    ],
)
def test_broken_lines(line: str, reason: str) -> None:
    with pytest.raises(ProgressError, match=reason):
        parse_line(line)


def test_progress_line_round_trips() -> None:
    line = progress_line(7, 0.5, 1.25, samples_per_s=128.0, now=10.0)
    assert line.endswith("\n") and "\n" not in line[:-1]
    rec = parse_line(line)
    assert (rec.step, rec.step_time_s, rec.loss, rec.samples_per_s, rec.tokens_per_s, rec.time) == (
        7,
        0.5,
        1.25,
        128.0,
        None,
        10.0,
    )
    with pytest.raises(ProgressError, match="samples_per_s"):
        progress_line(1, 1.0, None)  # the writer refuses what the reader would refuse


def test_tail_reads_whole_lines_only_counts_malformed_and_follows_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    assert tail.poll().latest is None  # no file yet: nothing, no error

    with open(path, "a", encoding="utf-8") as f:
        f.write(progress_line(10, 0.1, 3.0, samples_per_s=640.0))
        f.write("garbage\n")
        f.write('{"step": 20, "step_time_s": 0.1, "samples_per_s": 640, "lo')  # half a line
    first = tail.poll()
    assert first.latest is not None and first.latest.step == 10
    assert first.lines == 2 and first.malformed == ["not JSON (Expecting value)"]

    with open(path, "a", encoding="utf-8") as f:
        f.write('ss": 2.5}\n')
    second = tail.poll()
    assert second.latest is not None and (second.latest.step, second.latest.loss) == (20, 2.5)
    assert tail.poll().lines == 0  # nothing new

    # A new run replaces the file (shorter than what was read): the reader starts again at its top.
    path.unlink()
    path.write_text(progress_line(1, 0.2, 4.0, tokens_per_s=99.0))
    third = tail.poll()
    assert third.latest is not None and third.latest.step == 1 and third.latest.tokens_per_s == 99.0


def test_checkpoint_seconds_are_optional_and_round_trip() -> None:
    """The job's running total of checkpoint-save seconds: the goodput ledger's checkpoint stalls."""
    assert parse_line(json.dumps(GOOD)).checkpoint_s is None
    rec = parse_line(progress_line(7, 0.5, 1.0, samples_per_s=1.0, checkpoint_s=12.5))
    assert rec.checkpoint_s == 12.5
