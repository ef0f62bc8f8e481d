"""The fault storm, as root on the local RunPod with emulated hosts: a 4-node CPU Instant Cluster
(the local-cpu stack) trains while one node's host is killed (its pod lost), one rank is SIGSTOPped (a hang)
and an XID is recorded on a node; the supervisor, driven a round at a time (`Round.run_once`, what
`scripts/supervise --once` runs), recovers each on its own and releases the cluster when the run is done.

The scenario is the clock, not a person: before every round the emulator's clock moves on by the supervisor's
interval (5 min), and a round of healthy training waits (with a deadline) until the job has stepped on, so
each round stands for 5 minutes of training on the emulator's clock. Used by tests/hosts/test_storm.py (the
e2e, which asserts) and `python -m bench.storm` (the figures of docs/PERFORMANCE.md and docs/RELIABILITY.md).

    sudo .venv/bin/python -m bench.storm [--no-faults] [--healthy-rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from common.cachedir import cache_dir
from emulator import hostnet, netslot
from emulator.hostnet import Bridge
from harness.deadlines import scaled
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod, start_moto_s3
from harness.pulumi_cli import REPO, Pulumi
from harness.webhook import Receiver
from ops.workspace import prepare

T = TypeVar("T")
STACK = "local-cpu"
BUCKET = "trainstack-local-cpu-checkpoints"
PREFIX = f"trainstack/{STACK}/"
TORCH_VENV = cache_dir() / "torch-venv"
INTERVAL_S = 300.0  # trainstack:supervisor.interval_min (5), the default
NODES = 4
# The job's length and its pace against the emulator's clock: a round of training stands for at least
# STEPS_PER_ROUND steps (Scenario.tick). 1,500 steps leave room for three faults and their resumes on an idle
# machine (the job steps on during every round) and end within ~10 rounds of the last recovery.
STEPS = 1500
STEPS_PER_ROUND = 100
# The job: a tiny model (train/train.py), long enough to outlive three recoveries on a loaded machine.
NODE_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "TRAINSTACK_CPU_PROCS_PER_NODE": "1",
    "OMP_NUM_THREADS": "1",  # torch's idle intra-op thread spins through each step's sleep (tests/hosts too)
    # The bucket sync timer: each sync is a Python process importing boto3 and making a client (~0.5 CPU-s),
    # run by every node, so at 2 s four nodes spent about one core on syncs alone. A resume reads
    # the shared volume's newest checkpoint, not the bucket's; the bucket needs one before the host kill
    # (Scenario._checkpoint_in_bucket) and each start script's own last sync at its end.
    "TRAINSTACK_CHECKPOINT_INTERVAL_S": "10",
    "TRAINSTACK_CHECKPOINT_EVERY": "20",
    "TRAINSTACK_LOG_EVERY": "10",
    "TRAINSTACK_STEP_SLEEP_S": "0.05",
    "TRAINSTACK_METRICS_INTERVAL_S": "1",
}


class StormFailed(AssertionError):
    """The scenario did not reach its next event in time; the message says which and shows the logs."""


def wait_for(check: Callable[[], T | None], what: str, timeout_s: float, log: Callable[[], str]) -> T:
    """`check()`'s first truthy answer within the deadline (an event, never a judged duration). The deadline
    is what an idle machine needs, stretched by TRAINSTACK_TEST_DEADLINE_SCALE (harness/deadlines.py)."""
    limit = scaled(timeout_s)
    deadline = time.monotonic() + limit
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise StormFailed(f"{what}: not within {limit:.0f} s\n{log()}")
        time.sleep(0.5)


def missing() -> str | None:
    """Why the storm cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root: nodes are network namespaces"
    why = hostnet.unavailable_reason()
    if why is not None:
        return why
    for tool in ("ssh", "scp", "ssh-keygen", "unshare", "openssl"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    if not (TORCH_VENV / "bin" / "torchrun").exists():
        return f"no torch venv at {TORCH_VENV}; run scripts/bootstrap-torch"
    return None


def gpu_reading(index: int, xids: tuple[int, ...] = ()) -> dict[str, Any]:
    """One healthy H100 under load as the agent serves it (train/node/nvml.py GpuReading), with `xids`."""
    return {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-storm-{index:04d}",
        "pci_bus_id": f"00000000:{index + 0x18:02X}:00.0",
        "temperature_c": 62,
        "slowdown_temp_c": 90,
        "ecc_uncorrected_volatile": 0,
        "ecc_corrected_volatile": 0,
        "remapped_rows_uncorrectable": 0,
        "remap_pending": False,
        "remap_failed": False,
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
        "nvlink_up": [True] * 18,
        "throttle_mask": 0,
        "utilization_pct": 97,
        "memory_used_bytes": 60 * 2**30,
        "memory_total_bytes": 80 * 2**30,
        "power_w": 640.0,
        "sm_clock_mhz": 1980,
        "sm_clock_max_mhz": 1980,
        "nvlink_tx_bytes": 0,
        "nvlink_rx_bytes": 0,
        "xid_events": list(xids),
    }


@dataclass
class Recovery:
    fault: str  # host_killed, rank_stopped, xid
    fault_at: float  # the emulator's clock
    decision: str = ""
    resumed_at: float | None = None  # the first step of the recovered job, on the emulator's clock
    resumed_from: int | None = None  # the checkpoint step it resumed from
    loss_before: float | None = None  # the loss logged at that step before the fault
    loss_after: float | None = None  # the first loss logged after the resume
    loss_step: int | None = None  # its step (loss_before: the loss logged at that step, or the one before)

    @property
    def minutes(self) -> float | None:
        return None if self.resumed_at is None else (self.resumed_at - self.fault_at) / 60


@dataclass
class Result:
    faults: bool
    rounds: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    diagnostics: str = ""
    stopped_rank: int | None = None
    stopped_pid: int | None = None
    final_step: int | None = None
    first_loss: float | None = None  # the fresh start's first logged loss
    steps: int = 0
    ledger: dict[str, Any] = field(default_factory=dict)
    bill_at_release_usd: float | None = None
    bill_final_usd: float | None = None
    live_after: dict[str, Any] = field(default_factory=dict)
    namespaces_after: list[str] = field(default_factory=list)
    human_actions: int = 0  # nothing here but the rounds acts on the stack after `up`
    clusters_at_once: int = 0  # the most Instant Clusters that existed together (the emulator's audit)
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["recoveries"] = [asdict(r) | {"minutes": r.minutes} for r in self.recoveries]
        return out


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` (the Automation API and scripts/watch's sources read the process env)."""
    from providers import settings

    saved = dict(os.environ)
    os.environ.update(values)
    settings.reset()  # read again from this environment (the SSH key, known hosts, the RunPod URL)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        settings.reset()


class Storm:
    """One scenario on its own bridge, moto, local RunPod with hosts and Pulumi backend (removed after)."""

    def __init__(self, root: Path, steps: int, run_hours: float = 0.0) -> None:
        self.root = root
        self.steps = steps
        self.run_hours = run_hours
        self.bridge: Bridge  # on a local RunPod address slot of its own (emulator/netslot.py), in start()
        self.replay = root / "gpus"  # TRAINSTACK_AGENT_REPLAY_DIR: each node's GPU readings
        self.receiver = Receiver()
        self._stack: list[Callable[[], None]] = [self.receiver.close]

    # --- setup and teardown -------------------------------------------------------------------------------
    def start(self) -> None:
        root = self.root
        slot = netslot.claim()  # 10.250.N.1/24, apart from every other hosts test's or demo's bridge
        self._stack.append(slot.release)
        self.bridge = Bridge(f"tss{os.getpid() % 100000}", slot.slot.bridge_cidr)
        self.bridge.remove()  # a leftover of a killed run with the same pid
        self.bridge.create()
        self._stack.append(self._remove_bridge)
        self.replay.mkdir(parents=True, exist_ok=True)
        key = root / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        cert, cert_key = root / "s3.crt", root / "s3.key"
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
                *("-nodes", "-days", "1", "-subj", "/CN=trainstack-storm-s3"),
                *("-addext", f"subjectAltName=IP:{self.bridge.host_ip}"),
                *("-keyout", str(cert_key), "-out", str(cert)),
            ],
            check=True,
            capture_output=True,
        )
        moto = start_moto_s3(root / "moto.log", host=self.bridge.host_ip, tls=(cert, cert_key))
        self._stack.append(moto.stop)
        node_env = NODE_ENV | {
            "AWS_CA_BUNDLE": str(cert),
            "TRAINSTACK_PYTHON": str(TORCH_VENV / "bin" / "python"),
            "TRAINSTACK_STEPS": str(self.steps),
            "TRAINSTACK_AGENT_REPLAY_DIR": str(self.replay),
        }
        args = [*FAST_ARGS, "--hosts", "on", "--hosts-bridge", self.bridge.name]
        args += ["--hosts-path", str(TORCH_VENV / "bin")]
        for name, value in node_env.items():
            args += ["--hosts-env", f"{name}={value}"]
        self.runpod: LocalRunPod = start_local_runpod(root / "runpod", *args)
        self._stack.append(self.runpod.stop)
        with self.runpod.client() as api:
            api.put("/v2/account/ssh-keys", json={"keys": [key.with_suffix(".pub").read_text().strip()]})
        self.s3_endpoint = moto.endpoint_url
        workspace = prepare(STACK, root=root / "ws")
        extra = self.runpod.env() | {
            "AWS_ENDPOINT_URL_S3": moto.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CA_BUNDLE": str(cert),
            "TRAINSTACK_OUT_DIR": str(root / "out"),
            "TRAINSTACK_POLL_INTERVAL_S": "0.2",
            "TRAINSTACK_SSH_KEY": str(key),
            "TRAINSTACK_KNOWN_HOSTS_DIR": str(root / "known_hosts"),
            "TRAINSTACK_LOCAL_WORKSPACES": str(root / "ws"),
            "ALERT_WEBHOOK_URL": self.receiver.url,
        }
        self.cli = Pulumi(project=workspace, state=root / "state", extra_env=extra)
        self.cli.stack_init(STACK)
        self.runpod.admin.limits(spendLimit=300)  # stacks/Pulumi.local-cpu.yaml's raised limit
        self.config("trainstack:s3EndpointUrl", moto.endpoint_url)
        self.config("trainstack:cluster.nodes", str(NODES), path=True)
        # The run lasts ~2 h on the emulator's clock (20-odd rounds 5 min apart, plus the real time of `up`
        # and the recoveries), local-cpu's max_run_hours is 1, and a run is never longer than that for the
        # supervisor (its recovery records and replaced ids are read that far back): the stack says 3 h, as
        # a stack with a run that long would. An emulated long run (`run_hours`) says its own length, and
        # its cost cap covers it (an hour at local-cpu's 4-node price, $127.69, with room).
        hours = max(3, int(self.run_hours) + 3)
        self.config("trainstack:training.max_run_hours", str(hours), path=True)
        if hours > 3:
            self.config("trainstack:run.max_cost_usd", str(200 * hours), path=True)
        # The aggregator evaluates every 3 s (as JSON: `--path` would store 0.05 as text).
        self.config("trainstack:alerts", json.dumps({"interval_min": 0.05}))
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            self.cli.run(
                "config", "set", "--secret", "--stack", STACK, f"trainstack:secrets.{name}", "testing"
            )
        import boto3

        self.s3 = boto3.client(
            "s3",
            endpoint_url=moto.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (moto's own test credentials)
            verify=str(cert),
        )
        self._stack.append(self._destroy)

    def _remove_bridge(self) -> None:
        for name in hostnet.list_namespaces(f"ts-{self.bridge.name}-"):
            hostnet.delete_namespace(name)
        self.bridge.remove()

    def _destroy(self) -> None:
        if self.s3.list_buckets()["Buckets"]:
            versions = self.s3.list_object_versions(Bucket=BUCKET)
            for v in [*versions.get("Versions", []), *versions.get("DeleteMarkers", [])]:
                self.s3.delete_object(Bucket=BUCKET, Key=v["Key"], VersionId=v["VersionId"])
        self.cli.run("destroy", "--yes", "--stack", STACK, check=False)

    def close(self) -> None:
        while self._stack:
            try:
                self._stack.pop()()
            except Exception as exc:  # a teardown step failing must not keep the others from running
                print(f"storm: teardown: {type(exc).__name__}: {exc}", file=sys.stderr)

    # --- reading the cluster ------------------------------------------------------------------------------
    def config(self, key: str, value: str, path: bool = False) -> None:
        self.cli.run("config", "set", *(["--path"] if path else []), "--stack", STACK, key, value)

    def up(self) -> None:
        policy = ["--policy-pack", str(REPO / "policy")]
        policy += ["--policy-pack-config", str(REPO / "policy/config/local-cpu.json")]
        self.cli.run("up", "--yes", "--stack", STACK, *policy)

    def nodes(self) -> list[dict[str, Any]]:
        out = json.loads(self.cli.run("stack", "output", "--json", "--stack", STACK).stdout)
        return list(out.get("nodes") or [])

    def volume_dir(self) -> Path:
        volumes = self.runpod.admin.live()["volumes"]
        return Path(self.runpod.state_dir) / "volumes" / str(volumes[0]["id"]) / "trainstack"

    def logs(self) -> str:
        root = self.volume_dir() / "logs"
        paths = sorted(root.glob("*.log"), key=lambda p: p.stat().st_mtime)[-6:] if root.is_dir() else []
        agg = self.volume_dir() / "metrics" / "aggregator.log"
        tail = agg.read_text(errors="replace")[-1500:] if agg.exists() else ""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in paths) + tail

    def log(self, rank: int, pod_id: str) -> str:
        path = self.volume_dir() / "logs" / f"start-node-{rank}.{pod_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def aggregator(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.volume_dir() / "metrics" / "aggregator.json").read_text()))
        except (OSError, ValueError, IndexError):
            return {}

    def progress(self, pod_id: str) -> list[dict[str, Any]]:
        """Node 0's progress lines (the progress contract: step, loss, ...) of one pod's job."""
        path = self.volume_dir() / "metrics" / f"progress-node-0.{pod_id}.jsonl"
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def agg_row(self, rank: int) -> dict[str, Any]:
        """The aggregator's row of one node (its rows are in rank order, named by rank and address)."""
        rows = self.aggregator().get("nodes") or []
        return dict(rows[rank]) if rank < len(rows) else {}

    def agg_step(self) -> float | None:
        """The newest step the aggregator saw, once it is newer than the current nodes' start."""
        steps = [float(r["step"]) for r in self.aggregator().get("nodes") or [] if r.get("step") is not None]
        return max(steps) if steps else None

    def bill(self) -> float:
        """The emulator's whole bill for compute: every pod and every cluster (the replaced ones too)."""
        total = 0.0
        with self.runpod.client() as api:
            for kind in ("pods", "clusters"):
                records = api.get(f"/v2/billing/{kind}", params={"bucketSize": "day"}).json()["records"]
                total += sum(r.get("totalAmount") or 0 for r in records)
        return round(total, 6)


def _first_step(log: str) -> int | None:
    m = re.search(r"^first step (\d+)", log, re.MULTILINE)
    return int(m.group(1)) if m else None


def _losses(lines: list[dict[str, Any]]) -> dict[int, float]:
    return {int(p["step"]): float(p["loss"]) for p in lines if p.get("loss") is not None and "step" in p}


class Scenario:
    """Drives the rounds and the faults; every wait is on an event with a deadline."""

    def __init__(
        self, storm: Storm, result: Result, steps_per_round: int, ends_at: float | None = None
    ) -> None:
        from supervisor.cli import Round

        self.storm = storm
        self.result = result
        self.steps_per_round = steps_per_round
        self.ends_at = ends_at  # an emulated long run's end on the emulator's clock (bench only)
        self.admin = storm.runpod.admin
        self.round = Round(STACK, storm.cli.project, s3=storm.s3, clock=self.admin.now, log=self._log)
        self.losses: dict[int, float] = {}  # every loss node 0 logged, by step, across the jobs
        self.lines: list[str] = []

    def _log(self, line: str) -> None:
        self.lines.append(line)

    def diagnose(self) -> str:
        return "\n".join(self.lines[-40:]) + "\n" + self.storm.logs()

    def _finished(self) -> bool:
        return "run state finished" in self.storm.log(0, self.current[0]["pod_id"])

    def tick(self, wait_for_progress: bool = True, extra_s: float = 0.0) -> tuple[str, tuple[str, ...], str]:
        """5 minutes on the emulator's clock (of training, when `wait_for_progress`), then one round.

        A round of training stands for `steps_per_round` steps of the job (or its end): the emulator's clock
        and the job's progress then keep one pace whatever the machine's load, so the run's last step comes
        after a known number of rounds, well inside its cost cap on the emulator's clock. (Waiting for any
        new step made a round stand for ~30 steps on a loaded machine: a 2,000-step job needed ~65 rounds,
        5.4 h at $127.69/h, and the cap released it first: issue #29's storm timeout.)"""
        if wait_for_progress:
            before = self.storm.agg_step()
            wanted = (before or 0) + self.steps_per_round
            wait_for(
                lambda: self._finished() or ((s := self.storm.agg_step()) is not None and s >= wanted),
                f"the job stepping on to step {wanted:g} before the next round",
                240,
                self.diagnose,
            )
        self.admin.advance(INTERVAL_S + extra_s)
        record = self.round.run_once()
        kinds = (record.decision.kind, record.done)
        self.result.rounds.append(kinds)
        self._log(f"round {len(self.result.rounds)}: {kinds} {record.decision.reason} {record.errors}")
        if record.errors:
            raise StormFailed(f"round failed: {record.errors}\n{self.diagnose()}")
        if "release" in record.done and record.decision.kind != "finished":
            raise StormFailed(  # the run cannot reach its last step any more: say why now, not at a deadline
                f"the supervisor released the run before its last step: {record.decision.kind}: "
                f"{record.decision.reason}\n{self.diagnose()}"
            )
        return record.decision.kind, record.done, record.decision.reason

    def ticks_until(self, kind: str, limit: int, wait_for_progress: bool) -> str:
        for _ in range(limit):
            got, done, reason = self.tick(wait_for_progress)
            if got == kind and done:
                return reason
        raise StormFailed(f"no {kind} round in {limit} rounds: {self.result.rounds}\n{self.diagnose()}")

    def collect_losses(self) -> None:
        for n in self.current[:1]:
            self.losses.update(_losses(self.storm.progress(n["pod_id"])))

    def resumed(self, rec: Recovery) -> None:
        """Wait for the recovered job's first step; note where it resumed and the loss on both sides."""
        self.current = self.storm.nodes()
        node0 = self.current[0]
        first = wait_for(
            lambda: (
                _first_step(self.storm.log(0, node0["pod_id"])) is not None
                and len(self.storm.log(0, node0["pod_id"]).split("first step ")) >= 2
                and self._new_first_step(node0)
            ),
            f"the job resumed after {rec.fault}",
            420,
            self.diagnose,
        )
        rec.resumed_at = self.admin.now()
        rec.resumed_from = first
        after = wait_for(
            lambda: next(
                (v for s, v in sorted(_losses(self.storm.progress(node0["pod_id"])).items()) if s > first),
                None,
            ),
            "a loss logged after the resume",
            240,
            self.diagnose,
        )
        rec.loss_after = after
        step_after = min(s for s in _losses(self.storm.progress(node0["pod_id"])) if s > first)
        earlier = [s for s in self.losses if s <= step_after]  # the same step where it was logged before
        rec.loss_before = self.losses[max(earlier)] if earlier else None
        rec.loss_step = step_after

    def _new_first_step(self, node0: dict[str, Any]) -> int | None:
        """The newest 'first step N' of node 0's log that the previous job did not print."""
        log = self.storm.log(0, node0["pod_id"])
        found = [int(x) for x in re.findall(r"^first step (\d+)", log, re.MULTILINE)]
        if not found:
            return None
        seen = self.first_steps_seen.get(node0["pod_id"], 0)
        if len(found) <= seen:
            return None
        self.first_steps_seen[node0["pod_id"]] = len(found)
        return found[-1] if found[-1] > 0 else None

    # --- the run ------------------------------------------------------------------------------------------
    def run(self, healthy_rounds: int) -> None:
        storm, result = self.storm, self.result
        self.first_steps_seen: dict[str, int] = {}
        storm.up()
        self.current = storm.nodes()
        assert len(self.current) == NODES, self.current
        self.tick(wait_for_progress=False)  # the first round as soon as the compute is up (no clock moved)
        node0 = self.current[0]
        wait_for(lambda: _first_step(storm.log(0, node0["pod_id"])) == 0, "a fresh start", 240, self.diagnose)
        self.first_steps_seen[node0["pod_id"]] = 1
        chunks = [healthy_rounds // 4] * 4 if result.faults else [healthy_rounds]
        for _ in range(max(1, chunks[0])):
            self.tick()
        if result.faults:
            self.host_killed()
            for _ in range(chunks[1]):
                self.tick()
            self.rank_stopped()
            for _ in range(chunks[2]):
                self.tick()
            self.xid()
        if self.ends_at is not None:  # the rest of a long run: its healthy middle, in one stride of the clock
            # First a healthy round at the usual interval: the ledger ends a recovery at the first round that
            # sees the resumed job step on, and that must not be the stride's round (it would count the
            # whole healthy middle as recovery: a real run's rounds are never a day apart).
            self.tick()
            left = (self.storm.steps - (self.storm.agg_step() or 0)) / self.steps_per_round + 2
            self.tick(
                wait_for_progress=True, extra_s=max(0.0, self.ends_at - self.admin.now() - left * INTERVAL_S)
            )
        self.collect_losses()
        self.finish()

    def _checkpoint_in_bucket(self) -> None:
        listing = lambda: [  # noqa: E731
            o for o in self.storm.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("Contents", [])
            if re.fullmatch(r"step-(\d+)\.pt", o["Key"][len(PREFIX):]) and not o["Key"].endswith("step-0.pt")
        ]  # fmt: skip
        wait_for(listing, "a checkpoint in the bucket", 120, self.diagnose)

    def _not_finished(self, what: str) -> None:
        step = self.storm.agg_step() or 0
        if step >= self.storm.steps - 40:
            raise StormFailed(
                f"training is at step {step:g} of {self.storm.steps} before {what}: raise --steps"
            )

    def host_killed(self) -> None:
        self._checkpoint_in_bucket()
        self._not_finished("the host kill")
        self.collect_losses()
        victim = self.current[-1]
        rec = Recovery("host_killed", self.admin.now())
        self.admin.out_of_band(victim["pod_id"])  # the host died: RunPod lists the pod no more
        rec.decision = self.ticks_until("node_lost", 3, wait_for_progress=False)
        self.result.recoveries.append(rec)
        self.resumed(rec)

    def rank_stopped(self) -> None:
        self._not_finished("the hang")
        self.collect_losses()
        victim = self.current[2]
        pid = _stop_worker(self.storm, victim["pod_id"])
        self.result.stopped_rank, self.result.stopped_pid = int(victim["rank"]), pid
        rec = Recovery("rank_stopped", self.admin.now())
        # No step any more: rounds with nothing to wait for, until stalled_after_min (20) has passed.
        rec.decision = self.ticks_until("stalled", 8, wait_for_progress=False)
        self.result.diagnostics = next(
            (m for m in reversed(self.storm.receiver.texts) if "diagnostics" in m), ""
        )
        self.result.recoveries.append(rec)
        self.resumed(rec)

    def xid(self) -> None:
        self._not_finished("the XID")
        self.collect_losses()
        victim = self.current[1]
        path = self.storm.replay / f"{victim['pod_id']}.json"
        rank = int(victim["rank"])
        _write(path, [gpu_reading(0)])  # the aggregator first sees the GPU healthy (its XID baseline)
        wait_for(
            lambda: self.storm.agg_row(rank).get("gpu_util_mean") is not None,
            "the GPU's readings served",
            60,
            self.diagnose,
        )
        rec = Recovery("xid", self.admin.now())
        _write(path, [gpu_reading(0, xids=(79,))])  # XID 79: the GPU has fallen off the bus

        def firing() -> bool:
            name = self.storm.agg_row(rank).get("node")
            return any(
                a.get("rule") == "gpu_xid" and a.get("node") == name
                for a in self.storm.aggregator().get("firing") or []
            )

        wait_for(firing, "the XID alert firing", 60, self.diagnose)
        rec.decision = self.ticks_until("node_unhealthy", 8, wait_for_progress=True)
        self.result.recoveries.append(rec)
        self.resumed(rec)

    def finish(self) -> None:
        """Healthy rounds until the job's run state says finished, then the round that releases."""
        storm = self.storm
        # The round that released may have been one before this (a long run's stride can end on the job's
        # last step): rounds after a release only see nothing billing, and would never say finished again.
        released = any(kind == "finished" and "release" in acted for kind, acted in self.result.rounds)
        for _ in range(400):
            if released:
                break
            kind, acted, _ = self.tick(wait_for_progress=True)
            released = kind == "finished" and "release" in acted
        if not released:
            raise StormFailed(f"the run was not released: {self.result.rounds}\n{self.diagnose()}")
        self.result.final_step = max(_losses(storm.progress(self.current[0]["pod_id"])) or [0])
        self.collect_losses()
        self.result.first_loss = self.losses[min(self.losses)] if self.losses else None


def _write(path: Path, readings: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(readings))
    tmp.replace(path)


def _stop_worker(storm: Storm, pod_id: str) -> int:
    """SIGSTOP the training worker (train/train.py under torchrun) inside that pod's network namespace."""
    names = [n for n in hostnet.list_namespaces(f"ts-{storm.bridge.name}-") if pod_id in n]
    if not names:
        raise StormFailed(
            f"no namespace of pod {pod_id}: {hostnet.list_namespaces(f'ts-{storm.bridge.name}-')}"
        )
    inode = Path(f"/run/netns/{names[0]}").stat().st_ino
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "ns" / "net").stat().st_ino != inode:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"train/train.py") for a in argv) and b"torchrun" not in b" ".join(argv):
            env = (proc / "environ").read_bytes().split(b"\0")
            if any(e.startswith(b"LOCAL_RANK=") for e in env):  # a worker, not torchrun's own agent
                os.kill(int(proc.name), signal.SIGSTOP)
                return int(proc.name)
    raise StormFailed(f"no training worker in pod {pod_id}'s namespace\n{storm.logs()}")


def _clusters_at_once(entries: list[dict[str, Any]]) -> int:
    """The most clusters alive together, from the emulator's create and delete audit entries in order."""
    alive: set[str] = set()
    most = 0
    for e in entries:
        if e.get("kind") != "cluster":
            continue
        if e.get("event") == "cluster.create":
            alive.add(str(e.get("resourceId")))
        elif e.get("event") == "cluster.delete":
            alive.discard(str(e.get("resourceId")))
        most = max(most, len(alive))
    return most


def ledger_of(storm: Storm) -> dict[str, Any]:
    """The supervisor's own ledger of the run (scripts/supervise --report's), from the bucket."""
    from supervisor import store
    from supervisor.ledger import CATEGORIES, build, inputs_from_rounds, table
    from supervisor.store import read_attempts

    rounds = store.read_audit(storm.s3, BUCKET, STACK)
    attempts = read_attempts(storm.s3, BUCKET, STACK, since=0.0)
    ledger = build(inputs_from_rounds(rounds, attempts, 8))
    return {
        "goodput": ledger.goodput,
        "gpu_hours": {c: ledger.gpu_seconds.get(c, 0.0) / 3600 for c in CATEGORIES},
        "billed_gpu_hours": ledger.billed_gpu_seconds / 3600,
        "ledger_usd": ledger.ledger_usd,
        "billed_usd": ledger.billed_usd,
        "agreement": ledger.agreement,
        "line": ledger.line(),
        "table": table(ledger),
        "attempts": [a.__dict__ for a in attempts],
        "rounds": [
            [r.observation.at, r.observation.step, r.observation.nodes, r.decision.kind] for r in rounds
        ],
    }


def run(
    root: Path,
    faults: bool = True,
    healthy_rounds: int = 8,
    steps: int = STEPS,
    steps_per_round: int = STEPS_PER_ROUND,
    run_hours: float = 0.0,
) -> Result:
    """The whole scenario; everything it made is removed at the end, on failure too."""
    why = missing()
    if why is not None:
        raise StormFailed(f"the storm cannot run here: {why}")
    started = time.monotonic()
    result = Result(faults=faults, steps=steps)
    storm = Storm(root, steps, run_hours)
    try:
        storm.start()
        started_at = storm.runpod.admin.now()
        with environment(storm.cli.env()):
            # An emulated long run: the scenario's own ~2 h, then the clock moved on to `run_hours` in one
            # stride while the job trains (the ledger's accounting is the same: it sees steps on both sides).
            ends_at = started_at + run_hours * 3600 if run_hours else None
            scenario = Scenario(storm, result, steps_per_round, ends_at)
            try:
                scenario.run(healthy_rounds)
            finally:
                print("\n".join(scenario.lines), file=sys.stderr)
            result.bill_at_release_usd = None
            result.ledger = ledger_of(storm)
            result.bill_final_usd = storm.bill()
            result.messages = list(storm.receiver.texts)
            result.live_after = storm.runpod.admin.live()
            result.clusters_at_once = _clusters_at_once(storm.runpod.admin.audit())
            result.namespaces_after = hostnet.list_namespaces(f"ts-{storm.bridge.name}-")
    finally:
        storm.close()
    result.wall_s = time.monotonic() - started
    return result


BEGIN, END = "<!-- STORM-GOODPUT -->", "<!-- /STORM-GOODPUT -->"
TARGETS = {"storm": 0.90, "no_faults": 0.98}  # issue #29's goodput targets
RECOVERY_TARGET_MIN = 20.0  # each fault to its first resumed step, on the emulator's clock
CATEGORY_ORDER = ("productive", "provisioning", "health", "checkpoint", "lost", "recovery", "idle")


def section(runs: dict[str, dict[str, Any]], command: str) -> str:
    """docs/PERFORMANCE.md's section of the storm benchmark (the rest of the file is kept)."""
    lines = [
        BEGIN,
        "## Goodput under a fault storm (`scripts/bench --storm`)",
        "",
        "Written by `bench/storm.py`, as root on the local RunPod with emulated hosts: a 4-node CPU Instant",
        "Cluster (local-cpu) trains a tiny model while the supervisor's rounds run 5 min apart on the",
        "emulator's clock (a round of healthy training waits for the job to step on by `--steps-per-round`",
        "steps, so each stands for 5 min of training). Storm: a node's host killed, one rank SIGSTOPped, an",
        "XID on a node. The ledger is the supervisor's own (`scripts/supervise --report`), compared with",
        "RunPod's bill as its last round read it (every cluster of the run). With `--run-hours H` the run is",
        "emulated at H hours: after the faults and one more healthy round, one round moves the emulator's",
        "clock on in a single stride while the job trains ~100 steps. That stride stands for the run's",
        "healthy middle: productive by construction (the ledger counts it as any round, steps on both",
        "sides), less the checkpoint seconds the job measured in it; a real day of training would also",
        "stall for each of its checkpoints, which a tiny CPU model cannot show. The boot, the health checks,",
        "the faults, their recoveries and the end are measured. Command:",
        f"`{command}`.",
        "",
        "| run | rounds | billed GPU-h | goodput | target | productive / boot / gate+burn-in / checkpoint / "
        "lost / recovery / idle GPU-h | ledger vs bill | wall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        led = r["ledger"]
        cats = " / ".join(f"{led['gpu_hours'][c]:.2f}" for c in CATEGORY_ORDER)
        target = TARGETS["storm" if r["faults"] else "no_faults"]
        met = "met" if led["goodput"] >= target else "**missed**"
        agree = "n/a" if led["agreement"] is None else f"{led['agreement']:.2%}"
        lines.append(
            f"| {name} | {len(r['rounds'])} | {led['billed_gpu_hours']:.2f} | {led['goodput']:.1%} | "
            f">= {target:.0%} ({met}) | {cats} | {agree} | {r['wall_s'] / 60:.0f} min |"
        )
    storm = runs.get("storm")
    if storm is not None:
        lines += [
            "",
            "| fault | decision | resumed from step | fault to first resumed step (emulator's clock) "
            "| target |",
            "|---|---|---|---|---|",
        ]
        for rec in storm["recoveries"]:
            minutes = rec.get("minutes")
            met = "met" if minutes is not None and minutes <= RECOVERY_TARGET_MIN else "**missed**"
            shown = "not resumed" if minutes is None else f"{minutes:.1f} min"
            kind = rec["decision"].split(":", 1)[0]
            lines.append(f"| {rec['fault']} | {kind} | {rec['resumed_from']} | {shown} | <= 20 min ({met}) |")
    return "\n".join([*lines, END])


def splice(doc: str, text: str) -> str:
    """`doc` with its storm section replaced by `text` (bench/report.py's splice_section)."""
    from bench.report import splice_section

    return splice_section(doc, text, BEGIN, END)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.storm", description=__doc__.splitlines()[0])
    p.add_argument("--no-faults", action="store_true", help="only the run without a fault")
    p.add_argument("--faults-only", action="store_true", help="only the storm")
    p.add_argument("--healthy-rounds", type=int, default=8, help="rounds of healthy training (5 min each)")
    p.add_argument("--steps", type=int, default=STEPS, help="TRAINSTACK_STEPS of the job")
    p.add_argument(
        "--steps-per-round",
        type=int,
        default=STEPS_PER_ROUND,
        help="the steps a round of training stands for",
    )
    p.add_argument(
        "--run-hours",
        type=float,
        default=0.0,
        help="emulate a run this long: after the faults the emulator's clock moves on in one stride while "
        "the job trains, standing for the run's healthy middle (0: the scenario's own ~2 h; "
        "docs/PERFORMANCE.md says what it measures and what not)",
    )
    p.add_argument("--out", type=Path, help="the figures as JSON (a run not repeated is kept)")
    p.add_argument("--doc", type=Path, help="splice the section into this Markdown file")
    args = p.parse_args(argv)
    import tempfile

    wanted = [False] if args.no_faults else [True] if args.faults_only else [True, False]
    stored: dict[str, Any] = json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    for faults in wanted:
        with tempfile.TemporaryDirectory(prefix="trainstack-storm-") as tmp:
            result = run(
                Path(tmp), faults, args.healthy_rounds, args.steps, args.steps_per_round, args.run_hours
            )
        stored["storm" if faults else "no_faults"] = result.to_json()
        print(result.ledger.get("table", ""))
        for r in result.recoveries:
            shown = "not resumed" if r.minutes is None else f"{r.minutes:.1f} min"
            print(f"{r.fault}: resumed from step {r.resumed_from} after {shown}: {r.decision[:120]}")
        agreement = result.ledger.get("agreement")
        if agreement is None or agreement > 0.01:
            # A ledger that does not add up to RunPod's bill measured nothing: no figure is written from it.
            print(
                f"bench.storm: the ledger and RunPod's bill disagree ({agreement}); nothing written",
                file=sys.stderr,
            )
            return 1
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(stored, indent=2, default=str))
    if args.doc:
        command = (
            f"sudo scripts/bench --storm --healthy-rounds {args.healthy_rounds} --steps {args.steps} "
            f"--steps-per-round {args.steps_per_round}"
            + (f" --run-hours {args.run_hours:g}" if args.run_hours else "")
        )
        args.doc.write_text(splice(args.doc.read_text(), section(stored, command)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
