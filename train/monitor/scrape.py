"""Scrape the nodes' agents: Prometheus text in, one typed `NodeSample` per node out.

The agent (train/node/agent.py, docs/NODE-HEALTH.md) names its metrics `trainstack_*` with `node`, `rank`
and `gpu` labels; the parser is prometheus-client's own, so any exposition the agent serves parses here.
Scrapes run concurrently with one timeout each, so one dead node costs one timeout, not N. The timeout bounds
the whole request, not each read: an agent that trickles a byte a second is cut off at the deadline
. A value that is not a finite number (NaN, Inf) is read as not served, so it never reaches a
rule or the aggregator's state file.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Target:
    """One node's agent: where to reach it and how the alerts name it."""

    node: str  # the name messages use (rank and host)
    url: str  # http://<private ip>:<port>/metrics


@dataclass(frozen=True)
class NodeSample:
    """What one scrape of one node said; `error` is set (and the rest empty) when the scrape failed."""

    node: str
    time: float
    error: str | None = None
    gpu_util: dict[str, float] = field(default_factory=dict)  # gpu index -> ratio 0..1
    gpu_mem_used: dict[str, float] = field(default_factory=dict)  # gpu -> bytes
    gpu_mem_total: dict[str, float] = field(default_factory=dict)  # gpu -> bytes, when the agent serves it
    gpu_temp: dict[str, float] = field(default_factory=dict)  # gpu -> Celsius
    gpu_xid: dict[str, float] = field(default_factory=dict)  # gpu -> XID events seen (counter)
    gpu_ecc_uncorrected: dict[str, float] = field(default_factory=dict)  # gpu -> counter
    nvme_write_p99_s: float | None = None
    busbw_bytes_per_s: float | None = None  # the newest all-reduce bus bandwidth the node measured
    step: float | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    checkpoint_s: float | None = None  # the job's seconds saving checkpoints since it started
    health_s: float | None = None  # the node's health checks' time on this boot
    nvml: bool | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_GPU_SERIES = {
    "trainstack_gpu_utilization_ratio": "gpu_util",
    "trainstack_gpu_memory_used_bytes": "gpu_mem_used",
    "trainstack_gpu_memory_total_bytes": "gpu_mem_total",
    "trainstack_gpu_temperature_celsius": "gpu_temp",
    "trainstack_gpu_xid_errors_total": "gpu_xid",
    "trainstack_gpu_xid_errors": "gpu_xid",
    "trainstack_gpu_ecc_uncorrected_errors_total": "gpu_ecc_uncorrected",
    "trainstack_gpu_ecc_uncorrected_errors": "gpu_ecc_uncorrected",
}
_NODE_SERIES = {
    "trainstack_train_step": "step",
    "trainstack_train_step_time_seconds": "step_time_s",
    "trainstack_train_tokens_per_second": "tokens_per_s",
    "trainstack_train_checkpoint_seconds": "checkpoint_s",
    "trainstack_health_check_seconds": "health_s",
    "trainstack_allreduce_busbw_bytes_per_second": "busbw_bytes_per_s",
}


def parse(node: str, now: float, text: str) -> NodeSample:
    """One node's exposition as a sample; series the agent does not serve stay empty."""
    per_gpu: dict[str, dict[str, float]] = {attr: {} for attr in set(_GPU_SERIES.values())}
    scalars: dict[str, float] = {}
    nvml: bool | None = None
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not math.isfinite(s.value):
                continue  # NaN or Inf from a broken or hostile agent: as if not served
            if s.name in _GPU_SERIES and "gpu" in s.labels:
                per_gpu[_GPU_SERIES[s.name]][s.labels["gpu"]] = float(s.value)
            elif s.name in _NODE_SERIES:
                scalars[_NODE_SERIES[s.name]] = float(s.value)
            elif s.name == "trainstack_storage_write_latency_seconds" and s.labels.get("quantile") == "0.99":
                scalars["nvme_write_p99_s"] = float(s.value)
            elif s.name == "trainstack_agent_nvml_up":
                nvml = bool(s.value)
    return NodeSample(
        node=node,
        time=now,
        nvml=nvml,
        gpu_util=per_gpu["gpu_util"],
        gpu_mem_used=per_gpu["gpu_mem_used"],
        gpu_mem_total=per_gpu["gpu_mem_total"],
        gpu_temp=per_gpu["gpu_temp"],
        gpu_xid=per_gpu["gpu_xid"],
        gpu_ecc_uncorrected=per_gpu["gpu_ecc_uncorrected"],
        nvme_write_p99_s=scalars.get("nvme_write_p99_s"),
        busbw_bytes_per_s=scalars.get("busbw_bytes_per_s"),
        step=scalars.get("step"),
        step_time_s=scalars.get("step_time_s"),
        tokens_per_s=scalars.get("tokens_per_s"),
        checkpoint_s=scalars.get("checkpoint_s"),
        health_s=scalars.get("health_s"),
    )


Fetch = Callable[[str, float], str]  # (url, timeout) -> body; raises OSError on failure


MAX_BODY = 8 << 20


def http_fetch(url: str, timeout: float) -> str:
    """GET one agent's /metrics (plain HTTP on the private network; the agent never binds a public IP),
    all of it within `timeout` seconds: at the deadline the socket is shut down, mid-header or mid-body."""
    parts = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + timeout
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=timeout)
    conn.connect()
    sock = conn.sock
    assert sock is not None  # connect() set it

    def cut() -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status}")
        body = bytearray()
        while len(body) < MAX_BODY:
            chunk = resp.read1(MAX_BODY - len(body))
            if not chunk:
                break
            body += chunk
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no whole answer within {timeout:g} s")
        return body.decode("utf-8", "replace")
    except http.client.HTTPException as exc:  # a reply cut short by the deadline, or not HTTP
        raise OSError(str(exc)) from None
    finally:
        timer.cancel()
        conn.close()


def scrape_one(target: Target, now: float, fetch: Fetch, timeout: float) -> NodeSample:
    try:
        return parse(target.node, now, fetch(target.url, timeout))
    except (OSError, urllib.error.URLError) as exc:
        return NodeSample(node=target.node, time=now, error=f"agent unreachable ({type(exc).__name__})")
    except ValueError:
        return NodeSample(node=target.node, time=now, error="agent answered something that is not metrics")


def scrape_all(
    targets: Sequence[Target], now: float, fetch: Fetch = http_fetch, timeout: float = 5.0
) -> list[NodeSample]:
    """Every target at once (at most 32 in flight); results in the targets' order."""
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
        return list(pool.map(lambda t: scrape_one(t, now, fetch, timeout), targets))
