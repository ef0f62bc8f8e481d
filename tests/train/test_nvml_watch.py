"""The preflight's NVML watch file: samples between two times, half-written and failed lines skipped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.train.recorded import node_of
from train.node.nvml_watch import samples


def test_samples_between_times(tmp_path: Path) -> None:
    path = tmp_path / "watch.jsonl"
    gpus = [r.to_json() for r in node_of(2, "load")]
    lines = [
        json.dumps({"t": 10.0, "gpus": gpus}),
        json.dumps({"t": 11.0, "error": "NVML read failed (GPU is lost)"}),
        json.dumps({"t": 12.0, "gpus": gpus}),
        json.dumps({"t": 20.0, "gpus": gpus}),
        '{"t": 21.0, "gpus": [{"ind',  # the watcher was writing when the file was read
    ]
    path.write_text("\n".join(lines))
    got = samples(path, 10.5, 20.0)
    assert [t for t, _ in got] == [12.0, 20.0]
    assert [r.sm_clock_mhz for r in got[0][1]] == [1545, 1545]
    assert samples(tmp_path / "missing.jsonl", 0, 100) == []
