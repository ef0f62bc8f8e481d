"""The node's metrics agent: samples GPUs, storage latency and training progress; serves Prometheus text.

    python -m train.node.agent --port 9400 --bind 127.0.0.1 --interface ens1 --interval-s 5 \
        --checkpoint-dir DIR --progress-file F --jsonl OUT.jsonl --node <pod id> --rank 0 --device cuda

Every `--interval-s` it samples each source and keeps the newest values; a scrape reads those (it never
waits on NVML or the disk). It binds loopback (SSH tunnels) and the private fabric interface's address, not
the pod's public one. It also appends one JSON line per sample to `--jsonl`. A source that fails is logged
once per distinct error and counted (`trainstack_agent_sampler_errors_total`); the others keep serving, and
the agent never stops training. Without NVML (a CPU node) it says so once and serves the rest. Metric names
and labels: docs/NODE-HEALTH.md.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from train.node import hang, healthrecord, hostid, xid
from train.node.httpserve import serve_metrics
from train.node.nvml import THROTTLE_REASONS, FileSampler, GpuReading, NvmlSampler, Sampler, SamplerError
from train.node.progress import Progress, ProgressTail
from train.node.storage import Latency, LatencyFile, LatencySource, StorageProbe
from train.node.watchdog import PACE_NAME, Watchdog, bucket_upload

JSONL_MAX_BYTES = 64 << 20  # then the file moves to <name>.1 (one old file kept)
_SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's IPv4 address


@dataclass
class State:
    """The newest values of every source; the collector and the JSON writer read it under `lock`."""

    node: str
    rank: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    nvml_up: bool = False
    gpus: list[GpuReading] = field(default_factory=list)
    latency: Latency | None = None
    progress: Progress | None = None
    progress_seen_at: float | None = None  # when the newest progress line was read
    malformed_lines: int = 0
    health_s: float | None = None  # the health checks' time on this boot (the health record's elapsed_s)
    errors: dict[str, int] = field(default_factory=dict)  # source -> count
    sample_seconds: float = 0.0
    node_restarts: dict[str, int] = field(
        default_factory=dict
    )  # cause (hang, xid) -> restarts by the watchdog


class Agent:
    """Sources, the state they fill, and the log of what went wrong (each distinct error once)."""

    def __init__(
        self,
        state: State,
        sampler: Sampler | None,
        storage: LatencySource | None,
        progress: ProgressTail | None,
        jsonl: Path | None,
        log: Any = sys.stderr,
        health_record: Path | None = None,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.state, self.sampler, self.storage, self.progress = state, sampler, storage, progress
        self.watchdog = watchdog
        self.jsonl, self._log, self.health_record = jsonl, log, health_record
        self._health_seen: tuple[int, int, int] | None = None  # the record (inode, mtime_ns, size) last read
        self._said: set[str] = set()

    def say_once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            print(f"[trainstack agent] {message}", file=self._log, flush=True)

    def _failed(self, source: str, exc: Exception) -> None:
        with self.state.lock:
            self.state.errors[source] = self.state.errors.get(source, 0) + 1
        self.say_once(f"{source} sampling failed: {type(exc).__name__}: {exc} (still serving the rest)")

    def sample(self, now: float) -> None:
        """One round over every source; a failing source leaves its previous values and counts an error."""
        started = time.perf_counter()
        newest: Progress | None = None
        if self.sampler is not None:
            try:
                gpus = self.sampler.read()
                with self.state.lock:
                    self.state.gpus, self.state.nvml_up = gpus, True
            except (SamplerError, OSError) as exc:
                with self.state.lock:
                    self.state.nvml_up = False
                self._failed("nvml", exc)
        if self.storage is not None:
            try:
                self.storage.probe()
                with self.state.lock:
                    self.state.latency = self.storage.latency()
            except OSError as exc:
                self._failed("storage", exc)
        if self.progress is not None:
            try:
                found = self.progress.poll()
            except OSError as exc:
                self._failed("progress", exc)
            else:
                for why in found.malformed[:3]:
                    self.say_once(f"progress file: refused a line: {why}")
                with self.state.lock:
                    self.state.malformed_lines += len(found.malformed)
                    if found.latest is not None:
                        self.state.progress, self.state.progress_seen_at = found.latest, now
                newest = found.latest
        if self.watchdog is not None:
            self._watch(newest, now)
        if self.health_record is not None:
            self._read_health(self.health_record)
        with self.state.lock:
            self.state.sample_seconds = time.perf_counter() - started
        if self.jsonl is not None:
            try:
                self._append(now)
            except OSError as exc:
                self._failed("jsonl", exc)

    def _watch(self, newest: Progress | None, now: float) -> None:
        """The node's own recovery (train/node/watchdog.py); a failure of it never stops the agent."""
        assert self.watchdog is not None
        with self.state.lock:
            gpus = list(self.state.gpus)
        try:
            done = self.watchdog.tick(newest, gpus, now)
        except OSError as exc:
            self._failed("watchdog", exc)
            return
        if done is not None:
            with self.state.lock:
                self.state.node_restarts[done.cause] = self.state.node_restarts.get(done.cause, 0) + 1

    def _read_health(self, path: Path) -> None:
        """The health checks' time, read again only when the record changed (it is written before training
        and rarely after: a stat per sample, not a JSON parse)."""
        try:
            st = path.stat()
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)  # each write is a new file (os.replace)
            if seen == self._health_seen:
                return
            self._health_seen = seen  # a record that cannot be read is counted once, until it changes
            health = healthrecord.seconds(healthrecord.load(path))
        except FileNotFoundError:
            return  # no record yet (or a node without checks): nothing to serve
        except (OSError, ValueError) as exc:  # the record is replaced atomically; anything else counts
            self._failed("health", exc)
            return
        with self.state.lock:
            self.state.health_s = health

    def _append(self, now: float) -> None:
        assert self.jsonl is not None
        line = json.dumps(snapshot(self.state, now), separators=(",", ":")) + "\n"
        if self.jsonl.exists() and self.jsonl.stat().st_size > JSONL_MAX_BYTES:
            os.replace(self.jsonl, self.jsonl.with_name(self.jsonl.name + ".1"))
        with open(self.jsonl, "a", encoding="utf-8") as f:
            f.write(line)


def snapshot(state: State, now: float) -> dict[str, Any]:
    """The JSON line of one sample (docs/NODE-HEALTH.md, "Agent JSON lines")."""
    with state.lock:
        gpus = [
            {
                "gpu": g.index,
                "util_pct": g.utilization_pct,
                "mem_used_bytes": g.memory_used_bytes,
                "temp_c": g.temperature_c,
                "power_w": g.power_w,
                "sm_clock_mhz": g.sm_clock_mhz,
                "throttle": [n for n, bit in THROTTLE_REASONS.items() if (g.throttle_mask or 0) & bit],
                "ecc_uncorrected": g.ecc_uncorrected_volatile,
                "ecc_corrected": g.ecc_corrected_volatile,
                "xid": list(g.xid_events),
                "nvlink_tx_bytes": g.nvlink_tx_bytes,
                "nvlink_rx_bytes": g.nvlink_rx_bytes,
            }
            for g in state.gpus
        ]
        lat = state.latency
        p = state.progress
        return {
            "time": round(now, 3),
            "node": state.node,
            "rank": state.rank,
            "nvml": state.nvml_up,
            "gpus": gpus,
            "storage_us": None
            if lat is None
            else {
                "write_p50": round(lat.write_p50_us, 1),
                "write_p99": round(lat.write_p99_us, 1),
                "read_p50": round(lat.read_p50_us, 1),
                "read_p99": round(lat.read_p99_us, 1),
            },
            "progress": None
            if p is None
            else {
                "step": p.step,
                "step_time_s": p.step_time_s,
                "samples_per_s": p.samples_per_s,
                "tokens_per_s": p.tokens_per_s,
                "loss": p.loss,
                "checkpoint_s": p.checkpoint_s,
            },
            "errors": dict(state.errors),
        }


class StateCollector(Collector):
    """Prometheus view of `State`: gauges for levels, counters (`_total`) for what only grows."""

    def __init__(self, state: State) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        """Every section that renders; one that cannot (a value no float holds) is left out and counted
        as a `render` sampler error, so /metrics never answers 500 and loses every metric."""
        s = self.state
        node = [s.node, s.rank]
        with s.lock:
            families: list[Metric] = []
            sections: list[Callable[[], Iterator[Metric]]] = [
                lambda: self._gpu_metrics(s.gpus, node),
                lambda: _latency_metrics(s.latency, node) if s.latency is not None else iter(()),
                lambda: _progress_metrics(s, node),
            ]
            for section in sections:
                try:
                    families += list(section())
                except (ArithmeticError, ValueError, TypeError):
                    s.errors["render"] = s.errors.get("render", 0) + 1
            families += self._agent_metrics(node)  # last: counts this scrape's render errors too
        yield from families

    def _agent_metrics(self, node: list[str]) -> list[Metric]:
        s = self.state  # the caller holds s.lock
        errors = CounterMetricFamily(
            "trainstack_agent_sampler_errors",
            "Failed samples by source",
            labels=["node", "rank", "source"],
        )
        for source, count in sorted(s.errors.items()):
            errors.add_metric([*node, source], count)
        restarts = CounterMetricFamily(
            "trainstack_agent_node_restarts",
            "Restarts of this node's ranks by its own watchdog, by cause (hang, xid)",
            labels=["node", "rank", "cause"],
        )
        for cause in ("hang", "xid"):
            restarts.add_metric([*node, cause], s.node_restarts.get(cause, 0))
        return [
            _gauge("trainstack_agent_nvml_up", "1 when the last NVML read succeeded", node, int(s.nvml_up)),
            errors,
            restarts,
            _gauge("trainstack_agent_sample_seconds", "Duration of the last sample", node, s.sample_seconds),
        ]

    def _gpu_metrics(self, gpus: list[GpuReading], node: list[str]) -> Iterator[Metric]:
        labels = ["node", "rank", "gpu"]
        fams: dict[str, tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, Any]] = {
            "trainstack_gpu_utilization_ratio": (
                GaugeMetricFamily,
                "GPU busy share",
                _ratio("utilization_pct"),
            ),
            "trainstack_gpu_memory_used_bytes": (
                GaugeMetricFamily,
                "GPU memory in use",
                _attr("memory_used_bytes"),
            ),
            "trainstack_gpu_temperature_celsius": (
                GaugeMetricFamily,
                "GPU temperature",
                _attr("temperature_c"),
            ),
            "trainstack_gpu_power_watts": (GaugeMetricFamily, "GPU power draw", _attr("power_w")),
            "trainstack_gpu_sm_clock_hertz": (GaugeMetricFamily, "SM clock", _mhz("sm_clock_mhz")),
            "trainstack_gpu_ecc_uncorrected_errors": (
                CounterMetricFamily,
                "Volatile uncorrected ECC errors since the driver loaded",
                _attr("ecc_uncorrected_volatile"),
            ),
            "trainstack_gpu_ecc_corrected_errors": (
                CounterMetricFamily,
                "Volatile corrected ECC errors since the driver loaded",
                _attr("ecc_corrected_volatile"),
            ),
            "trainstack_gpu_xid_errors": (
                CounterMetricFamily,
                "XID errors that need another machine (docs/RECOVERY.md), seen since the agent started",
                lambda g: len(xid.split(g.xid_events)[1]),
            ),
            "trainstack_gpu_xid_restartable_errors": (
                CounterMetricFamily,
                "XID errors a process restart clears (the node restarts its ranks), since the agent started",
                lambda g: len(xid.split(g.xid_events)[0]),
            ),
            "trainstack_gpu_nvlink_transmit_bytes": (
                CounterMetricFamily,
                "NVLink data sent, all links",
                _attr("nvlink_tx_bytes"),
            ),
            "trainstack_gpu_nvlink_receive_bytes": (
                CounterMetricFamily,
                "NVLink data received, all links",
                _attr("nvlink_rx_bytes"),
            ),
            "trainstack_gpu_row_remap_pending": (
                GaugeMetricFamily,
                "1 when a memory row remap waits for a GPU reset",
                lambda g: None if g.remap_pending is None else int(g.remap_pending),
            ),
        }
        for name, (kind, doc, get) in fams.items():
            fam = kind(name, doc, labels=labels)
            for g in gpus:
                value = get(g)
                if value is not None:
                    fam.add_metric([*node, str(g.index)], float(value))
            yield fam
        throttle = GaugeMetricFamily(
            "trainstack_gpu_throttle_active",
            "1 while the clock event (throttle) reason holds the clocks down",
            labels=[*labels, "reason"],
        )
        for g in gpus:
            if g.throttle_mask is not None:
                for reason, bit in THROTTLE_REASONS.items():
                    throttle.add_metric([*node, str(g.index), reason], int(bool(g.throttle_mask & bit)))
        yield throttle


def _attr(name: str) -> Any:
    return lambda g: getattr(g, name)


def _ratio(name: str) -> Any:
    return lambda g: None if getattr(g, name) is None else getattr(g, name) / 100


def _mhz(name: str) -> Any:
    return lambda g: None if getattr(g, name) is None else getattr(g, name) * 1e6


def _gauge(name: str, doc: str, node: list[str], value: float) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(name, doc, labels=["node", "rank"])
    fam.add_metric(node, float(value))  # here, not at exposition: an OverflowError stays in its section
    return fam


def _latency_metrics(lat: Latency, node: list[str]) -> Iterator[Metric]:
    for op, p50, p99, doc in (
        ("write", lat.write_p50_us, lat.write_p99_us, "4 KiB write + fsync on the checkpoint directory"),
        ("read", lat.read_p50_us, lat.read_p99_us, "uncached 4 KiB read on the checkpoint directory"),
    ):
        fam = GaugeMetricFamily(
            f"trainstack_storage_{op}_latency_seconds", doc, labels=["node", "rank", "quantile"]
        )
        fam.add_metric([*node, "0.5"], p50 / 1e6)
        fam.add_metric([*node, "0.99"], p99 / 1e6)
        yield fam


def _progress_metrics(s: State, node: list[str]) -> Iterator[Metric]:
    malformed = CounterMetricFamily(
        "trainstack_train_progress_refused_lines",
        "Progress lines that broke the contract",
        labels=["node", "rank"],
    )
    malformed.add_metric(node, s.malformed_lines)
    yield malformed
    p = s.progress
    if p is None:
        return
    yield _gauge("trainstack_train_step", "Optimizer steps done", node, p.step)
    yield _gauge(
        "trainstack_train_step_time_seconds", "Mean step time since the previous line", node, p.step_time_s
    )
    if p.samples_per_s is not None:
        yield _gauge(
            "trainstack_train_samples_per_second", "Samples per second, whole job", node, p.samples_per_s
        )
    if p.tokens_per_s is not None:
        yield _gauge(
            "trainstack_train_tokens_per_second", "Tokens per second, whole job", node, p.tokens_per_s
        )
    if p.loss is not None:
        yield _gauge("trainstack_train_loss", "Training loss at the newest step", node, p.loss)
    if p.checkpoint_s is not None:
        yield _gauge(
            "trainstack_train_checkpoint_seconds",
            "Seconds the job has spent saving checkpoints since it started",
            node,
            p.checkpoint_s,
        )
    if s.health_s is not None:
        yield _gauge(
            "trainstack_health_check_seconds",
            "Seconds the node's health checks (gate, straggler, all-reduce, burn-in) took on this boot",
            node,
            s.health_s,
        )
    if s.progress_seen_at is not None:
        yield _gauge(
            "trainstack_train_progress_timestamp_seconds",
            "When the newest line was read",
            node,
            s.progress_seen_at,
        )


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of a network interface, or None when it has none (or does not exist)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m train.node.agent", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", action="append", default=[], help="address to serve on (repeatable)")
    p.add_argument("--interface", default="", help="also serve on this interface's IPv4 address")
    p.add_argument(
        "--own-address",
        default="",
        help="also serve on this address when it is one of this host's (the node's hostfile address, which "
        "the aggregator scrapes: a pool pod's private address is on no fabric interface)",
    )
    p.add_argument("--interval-s", type=float, default=5.0)
    p.add_argument("--checkpoint-dir", type=Path)
    p.add_argument("--progress-file", type=Path)
    p.add_argument("--health-record", type=Path, help="the node's health record: serve its checks' time")
    p.add_argument("--jsonl", type=Path)
    p.add_argument("--node", default=os.environ.get("RUNPOD_POD_ID") or socket.gethostname())
    p.add_argument("--rank", default=os.environ.get("NODE_RANK", "0"))
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--watchdog",
        type=Path,
        metavar="RUN_DIR",
        help="restart this node's ranks on a hang or a restart-class XID (train/node/watchdog.py); the pace "
        "for the next start goes to RUN_DIR/pace.<node>.json, the restarts to the --jsonl folder",
    )
    p.add_argument("--busy-file", type=Path, help="the job's busy marker (saving, evaluating)")
    p.add_argument(
        "--replay",
        type=Path,
        help="GPU readings from this JSON list (re-read when it changes) instead of NVML: CPU hosts, tests",
    )
    p.add_argument(
        "--latency-replay",
        type=Path,
        help="storage latency from this JSON object (re-read each sample) instead of probing: tests",
    )
    return p.parse_args(argv)


def _host_failed(bucket: str, node: str) -> Callable[[Sequence[Any], str], None]:
    """This host recorded as failed in the stack's bucket (train/node/hostid.py), from a watchdog thread."""

    def put(gpus: Sequence[Any], why: str) -> None:
        try:
            hostid.mark_failed(hostid.client(), bucket, hostid.HostId.of(gpus), node, why)
        except Exception as exc:  # a thread's last word: logged, never raised into the agent
            said = f"{type(exc).__name__}: {exc}"
            print(f"[trainstack agent] failed host not recorded: {said}", file=sys.stderr)

    def mark(gpus: Sequence[Any], why: str) -> None:  # the bucket never delays a sample
        threading.Thread(target=put, args=(gpus, why), daemon=True).start()

    return mark


def _watchdog(args: argparse.Namespace) -> Watchdog | None:
    """The node's own recovery, when asked for; bad TRAINSTACK_HANG_* values: exit 2 naming the variable."""
    if args.watchdog is None:
        return None
    try:
        bounds = hang.bounds_from_env()
    except ValueError as exc:
        print(f"[trainstack agent] {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    metrics = args.jsonl.parent if args.jsonl else args.watchdog
    bucket, run_id = os.environ.get("TRAINSTACK_CHECKPOINT_BUCKET"), os.environ.get("TRAINSTACK_RUN_ID")
    args.watchdog.mkdir(parents=True, exist_ok=True)
    metrics.mkdir(parents=True, exist_ok=True)
    return Watchdog(
        args.node,
        bounds,
        args.busy_file,
        metrics / f"node-restarts-{args.node}.jsonl",
        pace_file=args.watchdog / PACE_NAME.format(node=args.node),
        bundles=args.watchdog.parent / "diagnostics",  # the workdir's, beside the supervisor's bundles
        trace_prefix=os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
        upload=bucket_upload(bucket, run_id) if bucket and run_id else None,
        host_failed=_host_failed(bucket, args.node) if bucket else None,
        log=lambda text: print(f"[trainstack agent] {text}", file=sys.stderr, flush=True),
    )


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    state = State(args.node, str(args.rank))
    sampler: Sampler | None = None
    try:
        if args.replay:
            sampler = FileSampler(args.replay)
        else:
            sampler = NvmlSampler(slow_every=max(1, round(60 / args.interval_s)))
    except SamplerError as exc:
        what = "cpu node" if args.device == "cpu" else "GPU node"
        print(
            f"[trainstack agent] {exc}; {what}: GPU metrics off, serving storage and progress",
            file=sys.stderr,
        )
    storage: LatencySource | None = None
    if args.latency_replay:
        storage = LatencyFile(args.latency_replay)
    elif args.checkpoint_dir:
        storage = StorageProbe(args.checkpoint_dir)
    tail = ProgressTail(args.progress_file) if args.progress_file else None
    watchdog = _watchdog(args)
    agent = Agent(
        state, sampler, storage, tail, args.jsonl, health_record=args.health_record, watchdog=watchdog
    )
    registry = CollectorRegistry()
    registry.register(StateCollector(state))
    ProcessCollector(registry=registry)  # the agent's own CPU time and memory, for its cost budget
    if args.jsonl:
        args.jsonl.parent.mkdir(parents=True, exist_ok=True)
    agent.sample(time.time())  # the first scrape already sees every source
    addresses = list(args.bind)
    if args.interface:
        found = interface_ipv4(args.interface)
        if found:
            addresses.append(found)
        else:
            print(
                f"[trainstack agent] {args.interface} has no IPv4 address: not serving on it", file=sys.stderr
            )
    addresses = list(dict.fromkeys(addresses or ["127.0.0.1"]))

    def say(line: str) -> None:  # the server's lines are rate-limited there (train/node/httpserve.py)
        print(f"[trainstack agent] {line}", file=sys.stderr, flush=True)

    for addr in addresses:
        try:
            serve_metrics(
                registry, args.port, addr, log=say
            )  # an event loop: bounded connections, a deadline
        except OSError as exc:
            fix = (
                "another process holds the port (an agent still running?): stop it, or set another "
                "training.metrics_port"
                if exc.errno == errno.EADDRINUSE
                else "check --bind and --interface"
            )
            say(f"cannot serve on {addr}:{args.port} ({exc.strerror}); {fix}")
            return 2
    if args.own_address and args.own_address not in addresses:
        try:
            serve_metrics(registry, args.port, args.own_address, log=say)
            addresses.append(args.own_address)
        except OSError as exc:  # not an address of this host (behind NAT): the aggregator cannot scrape it
            print(f"[trainstack agent] not serving on {args.own_address}: {exc.strerror}", file=sys.stderr)
    print(
        f"[trainstack agent] serving http://{{{','.join(addresses)}}}:{args.port}/metrics "
        f"every {args.interval_s:g} s",
        file=sys.stderr,
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(args.interval_s):
        agent.sample(time.time())
    if sampler is not None:
        sampler.close()
    if storage is not None:
        storage.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
