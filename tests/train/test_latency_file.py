"""`LatencyFile`: the storage latency a test decides (the agent's `--latency-replay`), re-read at every probe;
a file that is not a latency record is a failed probe (OSError, counted by the agent), never a figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.node.agent import Agent, State
from train.node.storage import Latency, LatencyFile

FIGURES = {"write_p50_us": 40.0, "write_p99_us": 55.0, "read_p50_us": 20.0, "read_p99_us": 30.0}


def test_each_probe_reads_the_file_again(tmp_path: Path) -> None:
    path = tmp_path / "latency.json"
    path.write_text(json.dumps(FIGURES | {"window_ops": 64}))
    source = LatencyFile(path)
    assert source.latency() is None  # nothing before the first probe
    source.probe()
    assert source.latency() == Latency(40.0, 55.0, 20.0, 30.0, 64)
    path.write_text(json.dumps(FIGURES | {"write_p99_us": 1200, "window_ops": 64}))
    source.probe()
    assert source.latency() is not None and source.latency().write_p99_us == 1200.0  # type: ignore[union-attr]
    source.remove()
    assert path.exists()  # the file is the test's


@pytest.mark.parametrize("text", ["", "[]", '{"write_p50_us": 1}', json.dumps(FIGURES | {"window_ops": "x"})])
def test_a_file_that_is_not_a_record_is_a_failed_probe(tmp_path: Path, text: str) -> None:
    path = tmp_path / "latency.json"
    path.write_text(text)
    with pytest.raises(OSError, match="not a latency record"):
        LatencyFile(path).probe()


def test_the_agent_counts_a_bad_file_and_keeps_the_last_figures(tmp_path: Path) -> None:
    path = tmp_path / "latency.json"
    path.write_text(json.dumps(FIGURES | {"window_ops": 8}))
    state = State("pod-0", "0")
    log = tmp_path / "log"
    with log.open("w") as f:
        agent = Agent(state, None, LatencyFile(path), None, None, log=f)
        agent.sample(1.0)
        path.write_text("{")
        agent.sample(2.0)
    assert state.latency == Latency(40.0, 55.0, 20.0, 30.0, 8)
    assert state.errors == {"storage": 1}
    assert "storage sampling failed" in log.read_text()
