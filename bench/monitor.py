"""Benchmarks of the run's watch loop (issue #19 targets), against emulated node agents on loopback.

    python -m bench.monitor [--seconds 30]

1. one aggregation round (scrape + rules + state file) over 8 and over 64 agents, each serving the
   agent's metric families for 8 GPUs (target: < 2 s for 8 nodes, < 5 s for 64);
2. the aggregator process itself at a 5 s interval over 8 agents: CPU share of one core and peak RSS
   (target: < 2 % of a core, < 80 MB).
Prints one JSON document; docs/MONITORING.md records a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Summary, generate_latest

from train.monitor.aggregator import Aggregator, targets_from_hostfile
from train.monitor.evaluate import Evaluator
from train.monitor.notify import Notifier
from train.monitor.rules import AlertRules
from train.monitor.scrape import Target

GPUS = 8


def exposition(node: str, rank: int) -> bytes:
    """What one 8-GPU node's agent serves: the agent's families (docs/NODE-HEALTH.md), plausible values."""
    reg = CollectorRegistry()
    labels = ["node", "rank", "gpu"]
    gauges = {
        "trainstack_gpu_utilization_ratio": 0.9,
        "trainstack_gpu_memory_used_bytes": 61e9,
        "trainstack_gpu_temperature_celsius": 68.0,
        "trainstack_gpu_power_watts": 610.0,
        "trainstack_gpu_sm_clock_hertz": 1.98e9,
        "trainstack_gpu_row_remap_pending": 0,
    }
    for name, value in gauges.items():
        g = Gauge(name, name, labels, registry=reg)
        for gpu in range(GPUS):
            g.labels(node, str(rank), str(gpu)).set(value)
    for name in (
        "trainstack_gpu_xid_errors",
        "trainstack_gpu_ecc_uncorrected_errors",
        "trainstack_gpu_nvlink_transmit_bytes",
        "trainstack_gpu_nvlink_receive_bytes",
    ):
        c = Counter(name, name, labels, registry=reg)
        for gpu in range(GPUS):
            c.labels(node, str(rank), str(gpu)).inc(0)
    throttle = Gauge("trainstack_gpu_throttle_active", "t", [*labels, "reason"], registry=reg)
    for gpu in range(GPUS):
        for reason in ("sw_thermal", "hw_thermal", "hw_power_brake", "hw_slowdown", "sw_power_cap"):
            throttle.labels(node, str(rank), str(gpu), reason).set(0)
    lat = Summary("trainstack_storage_write_latency_seconds", "w", ["node", "rank"], registry=reg)
    lat.labels(node, str(rank)).observe(45e-6)
    for name, value in (
        ("trainstack_train_step", 1200),
        ("trainstack_train_step_time_seconds", 0.5),
        ("trainstack_train_tokens_per_second", 2.6e5),
    ):
        Gauge(name, name, ["node", "rank"], registry=reg).labels(node, str(rank)).set(value)
    return generate_latest(reg)


class Agents:
    """N agents on loopback addresses 127.0.0.2, .3, ... sharing one port, as N nodes' agents would on their
    private IPs; served by threads of this process."""

    def __init__(self, n: int) -> None:
        self.servers: list[ThreadingHTTPServer] = []
        self.port = 0
        for rank in range(n):
            body = exposition(f"pod-{rank}", rank)

            class Handler(BaseHTTPRequestHandler):
                payload = body

                def do_GET(self) -> None:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(self.payload)))
                    self.end_headers()
                    self.wfile.write(self.payload)

                def log_message(self, *args: object) -> None:
                    pass

            server = ThreadingHTTPServer((self.ip(rank), self.port), Handler)
            self.port = server.server_address[1]
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)

    @staticmethod
    def ip(rank: int) -> str:
        return f"127.0.{(rank + 2) // 256}.{(rank + 2) % 256}"

    def hostfile(self) -> str:
        return "".join(f"{self.ip(rank)} slots={GPUS}\n" for rank in range(len(self.servers)))

    def targets(self) -> list[Target]:
        return targets_from_hostfile(self.hostfile(), self.port)

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


def round_seconds(n: int, rounds: int = 7) -> dict[str, Any]:
    agents = Agents(n)
    try:
        rules = replace(AlertRules(), interval_s=5, digest_every_s=0, cost_per_hour_usd=255.36)
        with tempfile.TemporaryDirectory() as tmp:
            agg = Aggregator(
                rules,
                "bench",
                agents.targets(),
                Path(tmp) / "state.json",
                Evaluator(rules, time.time()),
                Notifier(rules, "bench", lambda _t: True),
            )
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                state = agg.run_round(time.time())
                times.append(time.perf_counter() - t0)
            assert all(row["ok"] for row in state["nodes"]), "an emulated agent did not answer"
        return {"nodes": n, "median_s": round(statistics.median(times), 4), "max_s": round(max(times), 4)}
    finally:
        agents.close()


def process_cost(seconds: float) -> dict[str, Any]:
    """`python -m train.monitor.aggregator` at a 5 s interval over 8 agents: CPU share and peak RSS."""
    agents = Agents(8)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "alerts.json").write_text(replace(AlertRules(), interval_s=5, digest_every_s=0).to_json())
            (d / "hostfile").write_text(agents.hostfile())
            env = {k: v for k, v in os.environ.items() if k != "ALERT_WEBHOOK_URL"}
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "train.monitor.aggregator",
                    "--rules",
                    str(d / "alerts.json"),
                    "--hostfile",
                    str(d / "hostfile"),
                    "--agent-port",
                    str(agents.port),
                    "--stack",
                    "bench",
                    "--state",
                    str(d / "state.json"),
                ],
                env=env,
                stderr=subprocess.DEVNULL,
            )
            try:
                time.sleep(3)  # imports and the first round, excluded from the steady-state share
                cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
                time.sleep(seconds)
                cpu1, t1 = _cpu_seconds(proc.pid), time.monotonic()
                rss = _peak_rss_mb(proc.pid)
                rounds_ok = json.loads((d / "state.json").read_text())["nodes"]
            finally:
                proc.terminate()
                proc.wait(timeout=10)
        return {
            "interval_s": 5,
            "nodes": 8,
            "measured_s": round(t1 - t0, 1),
            "cpu_share_of_one_core_pct": round(100 * (cpu1 - cpu0) / (t1 - t0), 3),
            "peak_rss_mb": round(rss, 1),
            "all_nodes_scraped": all(r["ok"] for r in rounds_ok),
        }
    finally:
        agents.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.monitor", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0, help="how long the aggregator process is measured")
    args = p.parse_args(argv)
    result = {
        "round_8": round_seconds(8),
        "round_64": round_seconds(64),
        "process": process_cost(args.seconds),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
