"""The metrics agent: Prometheus names and labels on recorded GPU readings, a failing source that never stops
the rest, and the real process on a CPU machine (no NVML) serving storage latency and training progress."""

from __future__ import annotations

import io
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.polling import poll, scaled
from tests.train.recorded import node_of
from train.monitor import scrape
from train.node import healthrecord
from train.node.agent import Agent, State, StateCollector, interface_ipv4, snapshot
from train.node.nvml import GpuReading, ReplaySampler, SamplerError, with_fault
from train.node.progress import Progress, ProgressTail, progress_line
from train.node.storage import StorageProbe

REPO = Path(__file__).resolve().parents[2]


def _scrape(state: State) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(StateCollector(state))
    text = generate_latest(registry).decode()
    return {
        s.name: [(x.labels, x.value) for x in fam.samples if x.name == s.name]
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


class FailingSampler:
    def read(self) -> list[GpuReading]:
        raise SamplerError("NVML read failed (GPU is lost)")

    def close(self) -> None:
        return None


def test_recorded_gpus_become_prometheus_metrics_with_units_and_labels(tmp_path: Path) -> None:
    load = with_fault(node_of(2, "load"), 1, xid_events=(79, 79))
    state = State("pod-abc", "3")
    progress = tmp_path / "progress.jsonl"
    progress.write_text(progress_line(1200, 0.031, 2.87, samples_per_s=2051.3, tokens_per_s=4.2e6))
    agent = Agent(
        state, ReplaySampler([load]), StorageProbe(tmp_path), ProgressTail(progress), None, io.StringIO()
    )
    agent.sample(1000.0)
    m = _scrape(state)
    gpu1 = {"node": "pod-abc", "rank": "3", "gpu": "1"}
    assert (gpu1, 220.002) in m["trainstack_gpu_power_watts"]
    assert (gpu1, 0.46) in m["trainstack_gpu_utilization_ratio"]
    assert (gpu1, 1545e6) in m["trainstack_gpu_sm_clock_hertz"]
    assert (gpu1, 46.0) in m["trainstack_gpu_temperature_celsius"]
    assert (gpu1, 2.0) in m["trainstack_gpu_xid_errors_total"]  # counters carry _total
    assert (gpu1, 0.0) in m["trainstack_gpu_ecc_uncorrected_errors_total"]
    assert (gpu1 | {"reason": "sw_power_cap"}, 1.0) in m["trainstack_gpu_throttle_active"]
    assert (gpu1 | {"reason": "hw_thermal_slowdown"}, 0.0) in m["trainstack_gpu_throttle_active"]
    node = {"node": "pod-abc", "rank": "3"}
    assert (node, 1200.0) in m["trainstack_train_step"]
    assert (node, 4.2e6) in m["trainstack_train_tokens_per_second"]
    assert (node, 1.0) in m["trainstack_agent_nvml_up"]
    quantiles = {labels["quantile"] for labels, _ in m["trainstack_storage_write_latency_seconds"]}
    assert quantiles == {"0.5", "0.99"}
    assert all(0 < v < 5 for _, v in m["trainstack_storage_read_latency_seconds"])
    for name in m:
        assert name.startswith(
            ("trainstack_gpu_", "trainstack_storage_", "trainstack_train_", "trainstack_agent_")
        )


def test_a_failing_sampler_is_counted_and_said_once_while_the_rest_is_served(tmp_path: Path) -> None:
    state, log = State("n", "0"), io.StringIO()
    progress = tmp_path / "p.jsonl"
    progress.write_text(progress_line(5, 0.1, 1.0, samples_per_s=10.0) + "not json\n")
    jsonl = tmp_path / "metrics" / "agent.jsonl"
    jsonl.parent.mkdir()
    agent = Agent(state, FailingSampler(), StorageProbe(tmp_path), ProgressTail(progress), jsonl, log)
    agent.sample(1.0)
    agent.sample(2.0)
    m = _scrape(state)
    assert m["trainstack_agent_sampler_errors_total"] == [({"node": "n", "rank": "0", "source": "nvml"}, 2.0)]
    assert m["trainstack_agent_nvml_up"] == [({"node": "n", "rank": "0"}, 0.0)]
    assert m["trainstack_train_progress_refused_lines_total"] == [({"node": "n", "rank": "0"}, 1.0)]
    assert "trainstack_storage_write_latency_seconds" in m and "trainstack_train_step" in m
    said = log.getvalue().splitlines()
    assert (
        said.count(
            "[trainstack agent] nvml sampling failed: SamplerError: NVML read failed (GPU is lost) "
            "(still serving the rest)"
        )
        == 1
    )
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert [x["time"] for x in lines] == [1.0, 2.0]
    assert lines[1]["errors"] == {"nvml": 2} and lines[1]["progress"]["step"] == 5
    assert lines[1]["storage_us"]["write_p99"] >= lines[1]["storage_us"]["write_p50"] > 0


def test_snapshot_json_line_lists_throttle_reasons_by_name() -> None:
    state = State("n", "0", gpus=node_of(1, "load"), nvml_up=True)
    (gpu,) = snapshot(state, 5.0)["gpus"]
    assert gpu["throttle"] == ["sw_power_cap"] and gpu["power_w"] == 163.819


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, deadline_s: float = 20.0) -> str:
    end = time.monotonic() + scaled(deadline_s)
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (loopback)
                return str(answer.read().decode())
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


@pytest.mark.services
def test_the_agent_process_on_a_cpu_machine(tmp_path: Path) -> None:
    port = _free_port()
    progress = tmp_path / "progress.jsonl"
    progress.write_text(progress_line(42, 0.2, 0.5, samples_per_s=320.0, checkpoint_s=3.25))
    record = tmp_path / "health.json"
    healthrecord.update(record, "gate", {"status": "skipped", "elapsed_s": 1.5})
    healthrecord.update(record, "burn_in", {"status": "pass", "elapsed_s": 600.0})
    argv = [
        sys.executable,
        "-m",
        "train.node.agent",
        "--port",
        str(port),
        "--interval-s",
        "1",
        "--device",
        "cpu",
    ]
    argv += [
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--progress-file",
        str(progress),
        "--interface",
        "lo",
        "--health-record",
        str(record),
    ]
    argv += ["--jsonl", str(tmp_path / "metrics" / "agent.jsonl"), "--node", "cpu-node", "--rank", "1"]
    proc = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        text = _get(f"http://127.0.0.1:{port}/metrics")
        assert 'trainstack_train_step{node="cpu-node",rank="1"} 42.0' in text
        assert 'trainstack_agent_nvml_up{node="cpu-node",rank="1"} 0.0' in text
        # the ledger's durations: checkpoint saves (progress contract), health checks (the health record)
        assert 'trainstack_train_checkpoint_seconds{node="cpu-node",rank="1"} 3.25' in text
        assert 'trainstack_health_check_seconds{node="cpu-node",rank="1"} 601.5' in text
        sample = scrape.parse("cpu-node", 0.0, text)
        assert (sample.checkpoint_s, sample.health_s) == (3.25, 601.5)
        assert "trainstack_storage_write_latency_seconds{" in text
        assert "process_resident_memory_bytes" in text  # the agent's own cost, for its budget
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert err.count("GPU metrics off, serving storage and progress") == 1
    assert not (tmp_path / "ckpt" / ".trainstack-latency-probe").exists()  # the probe file is cleaned up


def test_interface_address_lookup() -> None:
    assert interface_ipv4("lo") == "127.0.0.1"
    assert interface_ipv4("no-such-if0") is None


# Issue #34, class 4 on the node: lines that killed the agent or made /metrics answer 500. Each is refused
# (counted), the agent goes on, and the next good line is served.
HOSTILE_LINES = [
    ("a 400-digit loss", '{"step": 7, "step_time_s": 0.1, "samples_per_s": 1, "loss": ' + "9" * 400 + "}"),
    ("a 401-digit step", '{"step": ' + "9" * 401 + ', "step_time_s": 0.1, "samples_per_s": 1, "loss": 1}'),
    ("a 5000-digit step", '{"step": ' + "9" * 5000 + ', "step_time_s": 0.1, "samples_per_s": 1, "loss": 1}'),
    ("a NaN loss", '{"step": 7, "step_time_s": 0.1, "samples_per_s": 1, "loss": NaN}'),
    ("a NaN step", '{"step": NaN, "step_time_s": 0.1, "samples_per_s": 1, "loss": 1}'),
    ("an Infinity rate", '{"step": 7, "step_time_s": 0.1, "samples_per_s": Infinity, "loss": 1}'),
    ("a -Infinity loss", '{"step": 7, "step_time_s": 0.1, "samples_per_s": 1, "loss": -Infinity}'),
    ("a 400-digit step time", '{"step": 7, "step_time_s": ' + "9" * 400 + ', "samples_per_s": 1, "loss": 1}'),
    ("a boolean step", '{"step": true, "step_time_s": 0.1, "samples_per_s": 1, "loss": 1}'),
    ("a step past 2**53", '{"step": 9007199254740993, "step_time_s": 0.1, "samples_per_s": 1, "loss": 1}'),
]


@pytest.mark.services  # starts the agent (python -m train.node.agent) and reads it over HTTP
def test_hostile_progress_lines_are_refused_and_the_agent_goes_on_over_http(tmp_path: Path) -> None:
    port = _free_port()
    progress = tmp_path / "progress.jsonl"
    progress.write_text(progress_line(1, 0.2, 0.5, samples_per_s=320.0))
    argv = [sys.executable, "-m", "train.node.agent", "--port", str(port), "--interval-s", "1"]
    argv += ["--device", "cpu", "--progress-file", str(progress), "--node", "n", "--rank", "0"]
    proc = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert 'trainstack_train_step{node="n",rank="0"} 1.0' in _get(url)
        with progress.open("a") as f:
            f.write("".join(line + "\n" for _what, line in HOSTILE_LINES))
            f.write(progress_line(2, 0.2, 0.4, samples_per_s=320.0))

        def served() -> str | None:
            text = _get(url)
            return text if 'trainstack_train_step{node="n",rank="0"} 2.0' in text else None

        text = poll(served, "the good line after the hostile ones", 30)
        refused = (
            f'trainstack_train_progress_refused_lines_total{{node="n",rank="0"}} {float(len(HOSTILE_LINES))}'
        )
        assert refused in text
        assert 'trainstack_train_loss{node="n",rank="0"} 0.4' in text
        assert proc.poll() is None, "the agent died"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_a_value_no_float_holds_leaves_its_section_out_not_the_scrape() -> None:
    """/metrics never 500s: a progress record a float cannot hold (one the reader would refuse) is
    left out and counted as a render error; the rest is served."""
    state = State("n", "0")
    state.progress = Progress(10**400, 0.1, 1.0, None, 1.0, None)  # built past the reader, on purpose
    metrics = _scrape(state)
    assert "trainstack_train_step" not in metrics
    assert ({"node": "n", "rank": "0", "source": "render"}, 1.0) in metrics[
        "trainstack_agent_sampler_errors_total"
    ]
    assert "trainstack_agent_nvml_up" in metrics


def test_the_reader_keeps_up_with_a_fast_job(tmp_path: Path) -> None:
    """A job that wrote megabytes since the last poll: one poll reaches its newest line."""
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    with path.open("w") as f:
        for step in range(40_000):  # ~3.5 MB, more than one poll's read
            f.write(progress_line(step, 0.01, 2.0, samples_per_s=100.0))
    found = tail.poll()
    assert found.latest is not None and found.latest.step == 39_999 and found.malformed == []
    with path.open("a") as f:
        f.write(progress_line(40_000, 0.01, 1.9, samples_per_s=100.0))
    again = tail.poll()
    assert again.latest is not None and again.latest.step == 40_000 and again.lines == 1


def test_the_health_time_follows_the_record_and_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    record = tmp_path / "health.json"
    state = State("n", "0")
    agent = Agent(state, None, None, None, None, log=io.StringIO(), health_record=record)
    agent.sample(1.0)
    assert state.health_s is None  # no record yet: nothing served, nothing counted as an error
    healthrecord.update(record, "gate", {"status": "pass", "elapsed_s": 2.0})
    agent.sample(2.0)
    assert state.health_s == 2.0
    healthrecord.update(record, "burn_in", {"status": "pass", "elapsed_s": 600.0})  # preflight wrote on
    agent.sample(3.0)
    assert state.health_s == 602.0
    record.write_text("{not json")  # a record the agent cannot read: counted, the last value kept
    agent.sample(4.0)
    assert state.health_s == 602.0 and state.errors == {"health": 1}
    agent.sample(5.0)  # unchanged since: not parsed again, not counted again
    assert state.errors == {"health": 1}


@pytest.mark.services
def test_the_agent_on_a_taken_port_exits_with_one_line(tmp_path: Path) -> None:
    """Issue #62: it exited with a traceback (an agent still running from an earlier start holds the port)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "train.node.agent", "--port", str(port), "--device", "cpu", "--node", "n"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot serve on 127.0.0.1:{port} (Address already in use); another process holds the port" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
