"""The fault storm's harness, as root on the local RunPod with emulated hosts: a CPU Instant Cluster (the
local-cpu stack) on a bridge of its own, with moto behind TLS on that bridge (`Storm`); the supervisor's
rounds as the scenario's clock (`RoundClock`: before every round the emulator's clock moves on by the
supervisor's interval, and a round of healthy training first waits, with a deadline, until the job has stepped
on); the faults on the emulated hosts (a host killed, a training worker SIGSTOPped, an XID in a GPU's
readings); and what the run left to read (node 0's progress and logs, node 0's aggregator, RunPod's bill,
the emulator's audit).

The scenario and its figures are the benchmark's (`bench/storm.py`, `python -m bench.storm`); the e2e that
asserts them is tests/hosts/test_storm.py. This layer sits below the supervisor and ops
(docs/ARCHITECTURE.md): the round to run and the stack's workspace are handed in by the caller.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Any, Protocol, TypeVar

from common.cachedir import cache_dir
from emulator import hostnet, netslot
from emulator.hostnet import Bridge
from harness.deadlines import scaled
from harness.local import FAST_ARGS, Admin, LocalRunPod, start_local_runpod, start_moto_s3
from harness.pulumi_cli import REPO, Pulumi
from harness.webhook import Receiver

T = TypeVar("T")
STACK = "local-cpu"
BUCKET = "trainstack-local-cpu-checkpoints"
PREFIX = f"trainstack/{STACK}/"
TORCH_VENV = cache_dir() / "torch-venv"
INTERVAL_S = 300.0  # trainstack:supervisor.interval_min (5), the default
# The job: a tiny model (train/train.py), long enough to outlive three recoveries on a loaded machine.
NODE_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "TRAINSTACK_CPU_PROCS_PER_NODE": "1",
    "OMP_NUM_THREADS": "1",  # torch's idle intra-op thread spins through each step's sleep (tests/hosts too)
    # The bucket sync timer: each sync is a Python process importing boto3 and making a client (~0.5 CPU-s),
    # run by every node, so at 2 s four nodes spent about one core on syncs alone. A resume reads
    # the shared volume's newest checkpoint, not the bucket's; the bucket needs one before the host kill
    # (bench/storm.py's Scenario) and each start script's own last sync at its end.
    "TRAINSTACK_CHECKPOINT_INTERVAL_S": "10",
    "TRAINSTACK_CHECKPOINT_EVERY": "20",
    "TRAINSTACK_LOG_EVERY": "10",
    "TRAINSTACK_STEP_SLEEP_S": "0.05",
    "TRAINSTACK_METRICS_INTERVAL_S": "1",
    # prod's torchrun --max-restarts (local-cpu renders 0): the node's own watchdog ends a hung job's ranks,
    # torchrun restarts them in place (issue #66); with 0 the job would fail and wait for a supervisor round
    "TRAINSTACK_MAX_RESTARTS": "3",
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


def first_step(log: str) -> int | None:
    """The first 'first step N' of a start script's log (where its job started or resumed)."""
    m = re.search(r"^first step (\d+)", log, re.MULTILINE)
    return int(m.group(1)) if m else None


def first_steps(log: str) -> list[int]:
    """Every 'first step N' of a start script's log, in order (one per job it launched)."""
    return [int(x) for x in re.findall(r"^first step (\d+)", log, re.MULTILINE)]


def losses(lines: list[dict[str, Any]]) -> dict[int, float]:
    """The losses of progress lines, by step."""
    return {int(p["step"]): float(p["loss"]) for p in lines if p.get("loss") is not None and "step" in p}


def clusters_at_once(entries: list[dict[str, Any]]) -> int:
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


class Storm:
    """One local-cpu cluster on its own bridge, moto, local RunPod with hosts and Pulumi backend (removed
    after): `start(workspace)` with a workspace prepared under `workspaces` (ops.workspace.prepare), then
    `up()`, the readers and the faults, and `close()`."""

    def __init__(
        self,
        root: Path,
        steps: int,
        nodes: int = 4,
        run_hours: float = 0.0,
        node_env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.steps = steps
        self.node_count = nodes
        self.run_hours = run_hours
        self.node_env = NODE_ENV | (node_env or {})
        self.workspaces = root / "ws"  # TRAINSTACK_LOCAL_WORKSPACES: where the caller prepares the stack's
        self.bridge: Bridge  # on a local RunPod address slot of its own (emulator/netslot.py), in start()
        self.replay = root / "gpus"  # TRAINSTACK_AGENT_REPLAY_DIR: each node's GPU readings
        self.receiver = Receiver()
        self._stack: list[Callable[[], None]] = [self.receiver.close]

    # --- setup and teardown -------------------------------------------------------------------------------
    def start(self, workspace: Path) -> None:
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
        node_env = self.node_env | {
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
        self.admin: Admin = self.runpod.admin
        with self.runpod.client() as api:
            api.put("/v2/account/ssh-keys", json={"keys": [key.with_suffix(".pub").read_text().strip()]})
        self.s3_endpoint = moto.endpoint_url
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
            "TRAINSTACK_LOCAL_WORKSPACES": str(self.workspaces),
            "ALERT_WEBHOOK_URL": self.receiver.url,
        }
        self.cli = Pulumi(project=workspace, state=root / "state", extra_env=extra)
        self.cli.stack_init(STACK)
        self.admin.limits(spendLimit=300)  # stacks/Pulumi.local-cpu.yaml's raised limit
        self.config("trainstack:s3EndpointUrl", moto.endpoint_url)
        self.config("trainstack:cluster.nodes", str(self.node_count), path=True)
        # The storm's run lasts ~2 h on the emulator's clock (20-odd rounds 5 min apart, plus the real time of
        # `up` and the recoveries), local-cpu's max_run_hours is 1, and a run is never longer than that for
        # the supervisor (its recovery records and replaced ids are read that far back): the stack says 3 h,
        # as a stack with a run that long would. An emulated long run (`run_hours`) says its own length, and
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
        for name in self.namespaces():
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

    # --- the stack ----------------------------------------------------------------------------------------
    def config(self, key: str, value: str, path: bool = False) -> None:
        self.cli.run("config", "set", *(["--path"] if path else []), "--stack", STACK, key, value)

    def up(self) -> None:
        policy = ["--policy-pack", str(REPO / "policy")]
        policy += ["--policy-pack-config", str(REPO / "policy/config/local-cpu.json")]
        self.cli.run("up", "--yes", "--stack", STACK, *policy)

    def nodes(self) -> list[dict[str, Any]]:
        out = self.cli.stack(STACK).outputs()
        return list(out.get("nodes") or [])

    # --- reading the cluster ------------------------------------------------------------------------------
    def volume_dir(self) -> Path:
        volumes = self.admin.live()["volumes"]
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

    def node_restarts(self) -> list[dict[str, Any]]:
        """Every restart the nodes' own watchdogs recorded (train/node/watchdog.py), oldest first."""
        out = []
        for path in sorted((self.volume_dir() / "metrics").glob("node-restarts-*.jsonl")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return sorted(out, key=lambda r: float(r.get("at") or 0))

    def node_bundle_summary(self, pod_id: str) -> str:
        """The summary line of the newest diagnostics bundle a node's watchdog took on that pod."""
        found = sorted((self.volume_dir() / "diagnostics").glob(f"node-*/{pod_id}/ranks.json"))
        try:
            return str(json.loads(found[-1].read_text()).get("summary") or "") if found else ""
        except (OSError, ValueError):
            return ""

    def agg_row(self, rank: int) -> dict[str, Any]:
        """The aggregator's row of one node (its rows are in rank order, named by rank and address)."""
        rows = self.aggregator().get("nodes") or []
        return dict(rows[rank]) if rank < len(rows) else {}

    def agg_step(self) -> float | None:
        """The newest step the aggregator saw, once it is newer than the current nodes' start."""
        steps = [float(r["step"]) for r in self.aggregator().get("nodes") or [] if r.get("step") is not None]
        return max(steps) if steps else None

    def bucket_checkpoints(self) -> list[str]:
        """The keys of the run's step checkpoints in the bucket (step 0's, the fresh start's, left out)."""
        listing = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("Contents", [])
        return [
            o["Key"]
            for o in listing
            if re.fullmatch(r"step-(\d+)\.pt", o["Key"][len(PREFIX) :]) and not o["Key"].endswith("step-0.pt")
        ]

    def bill(self) -> float:
        """The emulator's whole bill for compute: every pod and every cluster (the replaced ones too)."""
        total = 0.0
        with self.runpod.client() as api:
            for kind in ("pods", "clusters"):
                records = api.get(f"/v2/billing/{kind}", params={"bucketSize": "day"}).json()["records"]
                total += sum(r.get("totalAmount") or 0 for r in records)
        return round(total, 6)

    def clusters_at_once(self) -> int:
        """The most Instant Clusters that existed together, from the emulator's audit."""
        return clusters_at_once(self.admin.audit())

    def namespaces(self) -> list[str]:
        """The network namespaces of this storm's emulated hosts that exist now."""
        return hostnet.list_namespaces(f"ts-{self.bridge.name}-")

    # --- the faults ---------------------------------------------------------------------------------------
    def kill_host(self, pod_id: str) -> None:
        """The pod's host dies: RunPod lists the pod no more (the emulator's out-of-band loss)."""
        self.admin.out_of_band(pod_id)

    def serve_readings(self, pod_id: str, readings: list[dict[str, Any]]) -> None:
        """The GPU readings that pod's metrics agent serves from now on (TRAINSTACK_AGENT_REPLAY_DIR)."""
        path = self.replay / f"{pod_id}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(readings))
        tmp.replace(path)

    def stop_worker(self, pod_id: str) -> int:
        """SIGSTOP the training worker (train/train.py under torchrun) inside that pod's network namespace;
        its pid."""
        names = [n for n in self.namespaces() if pod_id in n]
        if not names:
            raise StormFailed(f"no namespace of pod {pod_id}: {self.namespaces()}")
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
        raise StormFailed(f"no training worker in pod {pod_id}'s namespace\n{self.logs()}")


class Decision(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def reason(self) -> str: ...


class RoundOutcome(Protocol):
    """What the clock reads of a supervisor round (supervisor.model.RoundRecord)."""

    @property
    def decision(self) -> Decision: ...

    @property
    def done(self) -> tuple[str, ...]: ...

    @property
    def errors(self) -> tuple[str, ...]: ...


class RoundClock:
    """The supervisor's rounds as the scenario's clock: each `tick` moves the emulator's clock on by the
    supervisor's interval (after the job stepped on by `steps_per_round`, for a round of training) and runs
    one round (`run_once`: supervisor.cli.Round's, what `scripts/supervise --once` runs). Every round's
    (decision, done) is kept in `rounds`, its line in `lines`."""

    def __init__(
        self,
        storm: Storm,
        run_once: Callable[[], RoundOutcome],
        steps_per_round: int,
        finished: Callable[[], bool],
        lines: list[str],
    ) -> None:
        self.storm = storm
        self.run_once = run_once
        self.steps_per_round = steps_per_round
        self.finished = finished
        self.lines = lines
        self.rounds: list[tuple[str, tuple[str, ...]]] = []
        self.round_at: float | None = None

    def diagnose(self) -> str:
        return "\n".join(self.lines[-40:]) + "\n" + self.storm.logs()

    def tick(self, wait_for_progress: bool = True, extra_s: float = 0.0) -> tuple[str, tuple[str, ...], str]:
        """5 minutes on the emulator's clock (of training, when `wait_for_progress`), then one round.

        A round of training stands for `steps_per_round` steps of the job (or its end): the emulator's clock
        and the job's progress then keep one pace whatever the machine's load, so the run's last step comes
        after a known number of rounds, well inside its cost cap on the emulator's clock. (Waiting for any
        new step made a round stand for ~30 steps on a loaded machine: a 2,000-step job needed ~65 rounds,
        5.4 h at $127.69/h, and the cap released it first.)"""
        if wait_for_progress:
            before = self.storm.agg_step()
            wanted = (before or 0) + self.steps_per_round
            wait_for(
                lambda: self.finished() or ((s := self.storm.agg_step()) is not None and s >= wanted),
                f"the job stepping on to step {wanted:g} before the next round",
                240,
                self.diagnose,
            )
        self.storm.admin.advance(INTERVAL_S + extra_s)
        self.round_at = self.storm.admin.now()  # the round's start: where a fault it decides was detected
        record = self.run_once()
        kinds = (record.decision.kind, record.done)
        self.rounds.append(kinds)
        self.lines.append(f"round {len(self.rounds)}: {kinds} {record.decision.reason} {record.errors}")
        if record.errors:
            raise StormFailed(f"round failed: {record.errors}\n{self.diagnose()}")
        if "release" in record.done and record.decision.kind != "finished":
            raise StormFailed(  # the run cannot reach its last step any more: say why now, not at a deadline
                f"the supervisor released the run before its last step: {record.decision.kind}: "
                f"{record.decision.reason}\n{self.diagnose()}"
            )
        return record.decision.kind, record.done, record.decision.reason

    def ticks_until(self, kind: str, limit: int, wait_for_progress: bool) -> str:
        """Rounds until one decides `kind` and acts on it (its reason), at most `limit`."""
        for _ in range(limit):
            got, done, reason = self.tick(wait_for_progress)
            if got == kind and done:
                return reason
        raise StormFailed(f"no {kind} round in {limit} rounds: {self.rounds}\n{self.diagnose()}")
