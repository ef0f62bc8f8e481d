"""The watch loop as it runs on nodes, with real processes on loopback: two node agents (recorded H200 GPU
readings, replayed storage latency, real progress tail) serving Prometheus over HTTP, node 0's aggregator
rounds and a Slack-compatible webhook receiver. Faults are injected one at a time; each alert must give
exactly one firing and one resolved message, naming the node, and no message may carry the webhook's secret.

Nothing here waits on a real-time threshold: the aggregator's rounds run in this process on a clock the test
advances (`Run.round`), each round only after every live agent serves what the test wrote (each node's
progress line, GPU readings and storage latency: an event with a deadline). So a loaded machine can make
the test slower, never give it a stall, a slow disk or a lost node it did not inject. The aggregator's own
loop (`main`) is tested in tests/train/monitor/test_aggregator.py; the real fsync probe in tests/train/.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.polling import poll
from train.monitor.aggregator import Aggregator, targets_from_hostfile
from train.monitor.evaluate import Evaluator
from train.monitor.notify import Notifier, Webhook
from train.monitor.rules import AlertRules
from train.monitor.scrape import NodeSample, http_fetch, scrape_one
from train.node.nvml import GpuReading, Recording, with_fault

REPO = Path(__file__).resolve().parents[3]
RECORDING = REPO / "tests/train/recordings/nvml-2026-11-30-nvidia-h200-x2.json"
NODES = ("127.0.0.2", "127.0.0.3")  # each node's agent on its own loopback address, as on a private network
SECRET = "T0000/B0000/XXXXSECRETPART"
T0 = 1_800_000_000.0  # the test's clock: the aggregator sees only these instants
# Storage latency per node, microseconds: a tmpfs-like volume, and one as slow as fsync on a busy disk.
HEALTHY_US, SLOW_US = 40.0, 1_200.0
RULES = AlertRules(
    interval_s=10,
    stalled_after_s=30,
    startup_grace_s=600,
    unreachable_after=2,
    keep_firing_for_s=30,
    util_low_for_s=1e6,
    memory_idle_for_s=1e6,
    digest_every_s=0,
    gpu_memory_bytes=150e9,
    nvme_p99_max_us=200,
)

pytestmark = [pytest.mark.services, pytest.mark.allow_hosts(["127.0.0.1", *NODES])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((NODES[0], 0))
        port: int = s.getsockname()[1]
    return port


@dataclass
class Receiver:
    """The team's chat: records every message posted to /services/<secret>."""

    messages: list[str] = field(default_factory=list)

    def serve(self) -> ThreadingHTTPServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                ok = self.path == f"/services/{SECRET}"
                if ok:
                    outer.messages.append(body["text"])  # before the answer: `send` returns after this
                self.send_response(200 if ok else 404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def _write(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


class Run:
    """Two agents the test feeds, and the aggregator's rounds on the test's clock."""

    def __init__(self, tmp: Path, webhook: str) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.readings = Recording.load(RECORDING).snapshots["load"]
        self.steps = [0 for _ in NODES]
        self.latency_us = [HEALTHY_US for _ in NODES]
        self.xid = [False for _ in NODES]
        self.stalled: set[int] = set()
        self.now = T0
        self.log: list[str] = []
        for i, _ip in enumerate(NODES):
            self.write_readings(i, self.readings)
            self.set_latency(i, HEALTHY_US)
            self.start_agent(i)
        hostfile = "".join(f"{ip} slots=2\n" for ip in NODES)
        self.agg = Aggregator(
            RULES,
            "faults",
            targets_from_hostfile(hostfile, self.port),
            tmp / "aggregator.json",
            Evaluator(RULES, T0),
            Notifier(RULES, "faults", Webhook(webhook, log=self.log.append).send),
        )

    def write_readings(self, node: int, readings: list[GpuReading]) -> None:
        _write(self.tmp / f"gpus-{node}.json", [r.to_json() for r in readings])

    def set_latency(self, node: int, p99_us: float) -> None:
        self.latency_us[node] = p99_us
        fields = ("write_p50_us", "write_p99_us", "read_p50_us", "read_p99_us")
        _write(self.tmp / f"latency-{node}.json", dict.fromkeys(fields, p99_us) | {"window_ops": 64})

    def start_agent(self, node: int) -> None:
        argv = [
            *(sys.executable, "-m", "train.node.agent", "--port", str(self.port), "--bind", NODES[node]),
            *("--interval-s", "0.2", "--latency-replay", str(self.tmp / f"latency-{node}.json")),
            *("--progress-file", str(self.tmp / f"progress-{node}"), "--node", f"pod-{node}"),
            *("--rank", str(node), "--device", "cpu", "--replay", str(self.tmp / f"gpus-{node}.json")),
        ]
        self.procs[node] = subprocess.Popen(argv, env=self.env, stderr=subprocess.DEVNULL)

    def kill_agent(self, node: int) -> None:
        proc = self.procs.pop(node)
        proc.kill()
        proc.wait(timeout=10)

    def _serves_what_was_written(self, node: int) -> NodeSample | None:
        target = self.agg.targets[node]
        sample = scrape_one(target, self.now, http_fetch, timeout=10)
        if not sample.ok or sample.step != self.steps[node] or sample.nvme_write_p99_s is None:
            return None
        if abs(sample.nvme_write_p99_s * 1e6 - self.latency_us[node]) > 1:
            return None
        return sample if any(sample.gpu_xid.values()) == self.xid[node] else None

    def round(self) -> dict[str, Any]:
        """Each training node writes a step and its agent serves it; then one aggregator round, later."""
        for node in self.procs:
            if node not in self.stalled:
                self.steps[node] += 1
                line = {"v": 1, "time": self.now, "step": self.steps[node], "step_time_s": 0.2,
                        "samples_per_s": 40.0, "loss": 1.0 / self.steps[node]}  # fmt: skip
                with open(self.tmp / f"progress-{node}", "a") as f:
                    f.write(json.dumps(line) + "\n")
            poll(partial(self._serves_what_was_written, node), f"agent {node} serves the input", 60, 0.1)
        self.now += RULES.interval_s
        return self.agg.run_round(self.now)

    def rounds_until(self, what: str, check: Callable[[], bool], most: int) -> int:
        """Rounds until `check()` holds (how many it took); fails naming `what` after `most` rounds."""
        for done in range(1, most + 1):
            self.round()
            if check():
                return done
        raise AssertionError(f"{what}: not after {most} rounds; webhook log: {self.log}")

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[Run, Receiver]]:
    receiver = Receiver()
    server = receiver.serve()
    r = Run(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/services/{SECRET}")
    try:
        yield r, receiver
    finally:
        r.close()
        server.shutdown()
        server.server_close()


def test_each_fault_fires_once_and_resolves_once_naming_the_node(run: tuple[Run, Receiver]) -> None:
    r, rx = run
    # Rounds each rule needs, from the rules: a firing or resolution on any other round is a defect.
    stall_rounds = int(RULES.stalled_after_s // RULES.interval_s)
    clear_rounds = int(RULES.keep_firing_for_s // RULES.interval_s) + 1

    # Healthy first: both nodes scraped with progress, and nothing said.
    for _ in range(3):
        state = r.round()
    assert [n["ok"] and n["step"] for n in state["nodes"]] == [3, 3], state
    assert rx.messages == []

    def said(*words: str) -> Callable[[], bool]:
        return lambda: any(all(w in m for w in words) for m in rx.messages)

    # 1. Training stalled on node 1 (no new step), then resumed.
    r.stalled.add(1)
    took = r.rounds_until("stall fires", said("CRITICAL training_stalled", "rank-1 (127.0.0.3)"), 10)
    assert took == stall_rounds
    r.stalled.discard(1)
    took = r.rounds_until("stall resolves", said("resolved training_stalled", "rank-1"), 10)
    assert took == clear_rounds

    # 2. A recorded reading with a new XID on node 0's GPU 1; replacing the node (a fresh agent) resolves it.
    r.write_readings(0, with_fault(r.readings, 1, xid_events=(79,)))
    r.xid[0] = True
    took = r.rounds_until("XID fires", said("CRITICAL gpu_xid", "rank-0 (127.0.0.2) GPU 1", "1 new XID"), 5)
    assert took == 1
    r.write_readings(0, r.readings)
    r.xid[0] = False
    r.kill_agent(0)
    r.start_agent(0)
    took = r.rounds_until("XID resolves", said("resolved gpu_xid", "rank-0"), 10)
    assert took == clear_rounds

    # 3. The checkpoint volume turns slow on node 0, then fast again.
    r.set_latency(0, SLOW_US)
    took = r.rounds_until("NVMe fires", said("WARNING nvme_latency_high", "rank-0 (127.0.0.2)"), 5)
    assert took == 1
    r.set_latency(0, HEALTHY_US)
    took = r.rounds_until("NVMe resolves", said("resolved nvme_latency_high", "rank-0"), 10)
    assert took == clear_rounds

    # 4. Node 1's agent killed (as a node that vanished looks), then back.
    r.kill_agent(1)
    took = r.rounds_until("unreachable fires", said("CRITICAL node_unreachable", "rank-1 (127.0.0.3)"), 5)
    assert took == RULES.unreachable_after
    r.start_agent(1)
    took = r.rounds_until("unreachable resolves", said("resolved node_unreachable", "rank-1"), 10)
    assert took == clear_rounds

    firing = [m for m in rx.messages if "CRITICAL" in m or "WARNING" in m]
    resolved = [m for m in rx.messages if "resolved" in m]
    rules = sorted(m.split(" ")[3].rstrip(":") for m in firing)
    assert rules == ["gpu_xid", "node_unreachable", "nvme_latency_high", "training_stalled"], rx.messages
    assert sorted(m.split(" ")[3].rstrip(":") for m in resolved) == rules, rx.messages
    assert not any(SECRET in m or "SECRETPART" in m for m in rx.messages)
    assert not any("SECRETPART" in line for line in r.log)
