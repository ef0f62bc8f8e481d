"""The goodput ledger of the H200 validation run (bench/gpu_ledger.py) over the records that run wrote, the
packer that takes the runner to the GPU machine (bench/pack.py), and the runner itself on CPU."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import zlib
from pathlib import Path

import pytest

from bench import pack
from bench.gpu_ledger import (
    PREFIX,
    RUNNER,
    RecordsError,
    Start,
    checkpoint_spans,
    ledger_inputs,
    load,
    main,
    report,
    starts,
)
from common.cachedir import cache_dir
from supervisor.ledger import CATEGORIES, build
from train.node.progress import Progress

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "docs" / "gpu-validation" / "2026-12-01-h200-ledger"  # the records of the H200 run


def test_the_h200_run_adds_up_to_the_lease() -> None:
    records = load(RUN)
    ledger = build(ledger_inputs(records))
    held = records.lease["end"] - records.lease["start"]
    assert held == pytest.approx(270.0)  # the device tool's held seconds at the give-back
    assert ledger.billed_gpu_seconds == pytest.approx(held * records.lease["gpus"])
    assert sum(ledger.gpu_seconds.values()) == pytest.approx(ledger.billed_gpu_seconds, abs=1e-6)
    assert all(ledger.gpu_seconds[c] > 0 for c in CATEGORIES), ledger.gpu_seconds
    assert 0 < ledger.goodput < 1


def test_lost_work_is_the_steps_since_the_newest_checkpoint() -> None:
    records = load(RUN)
    ledger = build(ledger_inputs(records))
    killed = next(e for e in records.events if e["event"] == "fault" and e["how"] == "SIGKILL")
    third = starts(records)[2]
    assert third.resumed == 400  # the newest checkpoint when the job was killed at step 520
    step_s = statistics.median(p.step_time_s for p in records.progress)
    assert ledger.gpu_seconds["lost"] == pytest.approx((killed["step"] - third.resumed) * step_s, rel=0.1)


def test_inferred_checkpoint_stalls_hold_the_files_written() -> None:
    """The stalls come from the progress lines alone; the runner also saw each checkpoint's temp file and
    its final name appear (torch.save's part): every save lies inside one inferred stall."""
    records = load(RUN)
    spans = ledger_inputs(records).checkpoints
    seen = {e["file"]: e["t"] for e in records.events if e["event"] == "checkpoint_file"}
    saves = [
        (t, seen[name.lstrip(".").removesuffix(".tmp")]) for name, t in seen.items() if name.endswith(".tmp")
    ]
    assert len(spans) == len(saves) == 6
    poll = 0.05  # the runner looks every 20 ms
    for began, ended in saves:
        assert any(s.start - poll <= began and ended <= s.end + poll for s in spans), (began, ended)


def test_the_docs_show_this_ledger() -> None:
    doc = (REPO / "docs" / "GPU-VALIDATION.md").read_text()
    for line in report(RUN).splitlines()[1:]:
        assert line in doc, line


def test_a_run_without_its_lease_names_the_fix(tmp_path: Path) -> None:
    shutil.copytree(RUN, tmp_path / "run")
    (tmp_path / "run" / "lease.json").unlink()
    with pytest.raises(RecordsError, match=r"lease\.json is missing.*bench\.gpu_ledger lease"):
        load(tmp_path / "run")


def test_a_directory_without_records_is_named(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path)]) == 2  # no traceback: one line on stderr
    with pytest.raises(RecordsError, match=r"events\.jsonl is missing: the run writes it under \$OUT"):
        load(tmp_path)


def test_a_progress_line_without_time_is_refused(tmp_path: Path) -> None:
    shutil.copytree(RUN, tmp_path / "run")
    path = tmp_path / "run" / "progress.jsonl"
    lines = path.read_text().splitlines()
    line = json.loads(lines[3])
    del line["time"]
    path.write_text("\n".join([*lines[:3], json.dumps(line), *lines[4:]]) + "\n")
    with pytest.raises(RecordsError, match=r"progress\.jsonl:4: 'time' is needed"):
        load(tmp_path / "run")


def _line(step: int, t: float, step_s: float) -> Progress:
    return Progress(step, step_s, 1.0, None, 1.0, t)


def test_a_stall_is_the_time_beyond_the_steps_where_a_checkpoint_falls() -> None:
    lines = [_line(20, 10.0, 0.5), _line(40, 21.5, 0.5), _line(60, 31.7, 0.5)]  # 20 steps = 10 s
    start = Start(1, 0.0, 40.0, lines, 0, 40, stopped=False)
    (span,) = checkpoint_spans(start)  # 20 -> 40 crosses step 40; 40 -> 60 crosses none
    assert (span.start, span.end) == pytest.approx((20.0, 21.5))
    stopped = Start(1, 0.0, 40.0, [*lines, _line(62, 33.9, 0.5)], 0, 40, stopped=True)
    assert checkpoint_spans(stopped)[-1].seconds == pytest.approx(33.9 - 31.7 - 1.0)


def _decoded(command: str) -> str:
    blob = re.search(r"b85decode\('([^']*)'\)", command)
    assert blob is not None, command
    return zlib.decompress(base64.b85decode(blob.group(1))).decode()


def test_the_runner_packs_into_one_device_command() -> None:
    command = pack.command(RUNNER, PREFIX, env=False)
    assert len(command) <= pack.LIMIT
    assert command.startswith(PREFIX) and command.endswith("\nE\n")
    source = _decoded(command)
    assert source == pack.shrink(RUNNER.read_text())
    compile(source, "runner", "exec")


def test_shrink_drops_what_does_not_run_and_keeps_what_does() -> None:
    source = '''"""Module docstring."""
from __future__ import annotations
import json
from typing import Any

LIMIT: int = 3
later: str


class Box:
    """A class docstring."""

    def total(self, items: list[Any], *rest: int, scale: float = 1.0, **kw: Any) -> float:
        """Sum, scaled."""
        # a comment
        return (sum(items) + sum(rest)) * scale + LIMIT + len(json.dumps(kw))


def empty() -> None:
    """Only a docstring."""
'''
    shrunk = pack.shrink(source)
    for gone in ('"""', "# a comment", "Any", "annotations", "float", "later"):
        assert gone not in shrunk, gone
    assert "\n  return" in shrunk  # one space a level
    scope: dict[str, object] = {}
    exec(compile(shrunk, "shrunk", "exec"), scope)  # noqa: S102 (the test's own source, just shrunk)
    box = scope["Box"]()  # type: ignore[operator]
    assert box.total([1, 2], 3, scale=2.0, x=1) == (6 * 2.0) + 3 + len('{"x": 1}')
    assert scope["empty"]() is None  # type: ignore[operator]


def test_a_script_too_large_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "big.py"
    script.write_text("".join(f"print({os.urandom(40).hex()!r})\n" for _ in range(60)))
    with pytest.raises(pack.PackError, match="over the device tool's 2000"):
        pack.command(script)


TORCH = Path(os.environ.get("TRAINSTACK_TORCH_VENV", str(cache_dir() / "torch-venv"))) / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not TORCH.exists(), reason=f"no torch venv at {TORCH}; run scripts/bootstrap-torch")
def test_the_packed_runner_on_cpu_writes_records_whose_ledger_adds_up(tmp_path: Path) -> None:
    """The same program the GPU ran, on CPU with the tiny model: three starts, a SIGTERM and a SIGKILL."""
    source = _decoded(pack.command(RUNNER, PREFIX, env=False))
    work = tmp_path / "work"
    swaps = {
        "'gpt-124m', 16, 1000, 200, 20": "'tiny', 2, 60, 20, 5",
        "(300, 520)": "(25, 50)",
        "BURN_IN_S = 60": "BURN_IN_S = 0",  # no burn-in without a GPU
        "'--expected-gpus=1'": "'--expected-gpus=1', '--device=cpu'",
        "'--shards=1'": "'--shards=1', '--vocab=512', '--tokens-per-shard=20000'",
        "/tmp/ledger": str(work),
    }
    for old, new in swaps.items():
        assert old in source, old
        source = source.replace(old, new)
    script = tmp_path / "runner.py"
    script.write_text(source)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "TRAINSTACK_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    subprocess.run([str(TORCH), str(script)], cwd=REPO, env=env, timeout=600, check=True)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    done = [e for e in events if e["event"] == "train_done"]
    assert [e["run"] for e in done] == [1, 2, 3] and done[-1]["rc"] == 0, (out / "log.txt").read_text()[
        -3000:
    ]
    last = events[-1]["t"]
    (out / "lease.json").write_text(json.dumps({"start": events[0]["t"] - 5, "end": last + 1, "gpus": 1}))
    records = load(out)
    resumed = [s.resumed for s in starts(records)]
    assert resumed[0] == 0 and resumed[1] > 25 and resumed[2] == 40  # the stop step; the newest at the kill
    ledger = build(ledger_inputs(records))
    assert sum(ledger.gpu_seconds.values()) == pytest.approx(last + 1 - (events[0]["t"] - 5))
    for category in ("productive", "provisioning", "lost", "recovery"):
        assert ledger.gpu_seconds[category] > 0, ledger.gpu_seconds
