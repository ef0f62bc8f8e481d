"""Rendered start scripts run for real in dry mode: fake torchrun and system paths, the real node tools
(train/node/) with the health gate reading NVML readings recorded on an H200 machine."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from components.render import TERM_UPLOAD_S, render_artifacts
from providers.delivery.secrets_file import render
from tests.components.conftest import fake_nodes, stack_config
from tests.polling import scaled
from tests.train.recorded import node_of, write_replay
from train.node.nvml import with_fault

REPO = Path(__file__).resolve().parents[2]

FAKE_TORCHRUN = r"""#!/usr/bin/env bash
# Records its command line; plays train/node/launch.py's gate (the preflight's lines and verdict, then the
# wait for `go`); records the training environment.
printf '%s\n' "$*" >>"$FAKE_DIR/torchrun.log"
gate=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ ${args[i]} == --gate ]]; then gate=${args[i + 1]}; fi
done
if [[ -n "$gate" ]]; then
  {
    echo "TRAINSTACK_GEMM gpu=0 tflops=${FAKE_TFLOPS:-700.0}"
    echo "TRAINSTACK_ALLREDUCE ranks=64 bytes=1073741824 busbw=${FAKE_BUSBW:-500}GB/s"
    echo "TRAINSTACK_BUSBW_GB_PER_S=${FAKE_BUSBW:-500}"
  } >"$gate/preflight.out"
  if [[ -n "${FAKE_PREFLIGHT_FAIL:-}" ]]; then
    echo "$FAKE_PREFLIGHT_FAIL" >"$gate/failed"
    exit 1
  fi
  : >"$gate/passed"
  while [[ ! -e "$gate/go" ]]; do sleep 0.05; done
fi
env | grep -E '^(TRAINSTACK_|NCCL_|GLOO_|MASTER_|NODE_RANK=|NUM_NODES=)' | sort >"$FAKE_DIR/train.env"
printf '%s' "${HF_TOKEN:-}" >"$FAKE_DIR/hf_token.seen" # what training got from the secrets
if [[ -n "${FAKE_TRAIN_UNTIL:-}" ]]; then
  # Training that ends when the test says so, then takes FAKE_TRAIN_AFTER_S more.
  while [[ ! -e "$FAKE_TRAIN_UNTIL" ]]; do sleep 0.05; done
  sleep "${FAKE_TRAIN_AFTER_S:-0}"
fi
if [[ -n "${FAKE_TRAIN_SLEEP:-}" ]]; then
  sleep "$FAKE_TRAIN_SLEEP" >/dev/null 2>&1 &
  if [[ -n "${FAKE_TRAIN_IGNORES_TERM:-}" ]]; then
    # Training that takes its time to stop: notes the TERM, keeps running (off the script's output).
    echo "$$" >"$FAKE_DIR/train.pid"
    exec >/dev/null 2>&1
    trap 'echo got-term >>"$FAKE_DIR/torchrun.log"' TERM
    while kill -0 $! 2>/dev/null; do wait; done
    exit 0
  fi
  trap 'kill $!; echo got-term >>"$FAKE_DIR/torchrun.log"; exit 0' TERM
  wait
fi
exit "${FAKE_TRAIN_EXIT:-0}"
"""


class Node:
    """One rendered node script plus the fake machine it runs on."""

    def __init__(self, tmp: Path, stack: str, rank: int) -> None:
        config = stack_config(stack)
        text = render_artifacts(stack, config, fake_nodes(config)).start_scripts[f"start-node-{rank}.sh"]
        self.dir = tmp
        self.script = tmp / "start.sh"
        self.script.write_text(text)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
        (bin_dir / "torchrun").chmod(0o755)
        (tmp / "train").symlink_to(REPO / "train")  # what delivery puts in the workdir
        self.replay = write_replay(tmp / "nvml-replay.json", node_of(config.cluster.gpus_per_node))
        self.hosts = tmp / "hosts"
        self.hosts.write_text("127.0.0.1 localhost\n")
        for sub in ("net/ens1", "ib", "ckpt"):
            (tmp / sub).mkdir(parents=True)
        # A clean environment: nothing from the test machine (MASTER_ADDR, NCCL_*) leaks in.
        self.env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(tmp),
            "FAKE_DIR": str(tmp),
            "TRAINSTACK_DRY_RUN": "1",
            "TRAINSTACK_HOSTS_FILE": str(self.hosts),
            "TRAINSTACK_SYS_NET_DIR": str(tmp / "net"),
            "TRAINSTACK_SYS_IB_DIR": str(tmp / "ib"),
            "TRAINSTACK_CHECKPOINT_DIR": str(tmp / "ckpt"),
            "TRAINSTACK_WORKDIR": str(tmp),
            "TRAINSTACK_MIN_FREE_DISK_GB": "0",
            "TRAINSTACK_PYTHON": sys.executable,  # has nvidia-ml-py and prometheus-client, as a node does
            "TRAINSTACK_GATE_REPLAY": str(self.replay),
            "TRAINSTACK_METRICS_PORT": "0",  # one test turns the agent on, on a free port
            "RUNPOD_POD_ID": "test-pod",
            "TRAINSTACK_SECRETS_DIR": str(tmp / "secrets"),  # where delivery:SecretsFile writes them
            **dict.fromkeys(config.training.secrets, "s3cr3t-value"),
        }

    def start(self, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", str(self.script)],
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, **env: str) -> tuple[int, str]:
        proc = self.start(**env)
        out, _ = proc.communicate(timeout=30)
        return proc.returncode, out

    def train_env(self) -> dict[str, str]:
        lines = (self.dir / "train.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def torchrun_calls(self) -> list[str]:
        return (self.dir / "torchrun.log").read_text().splitlines()


@pytest.fixture
def prod3(tmp_path: Path) -> Node:
    return Node(tmp_path, "prod", 3)


def test_rendered_values_without_runpod_env(prod3: Node) -> None:
    code, out = prod3.run()
    assert code == 0, out
    # One launch: the preflight, then training, in the same workers (train/node/launch.py).
    (launch,) = prod3.torchrun_calls()
    assert launch.startswith(
        "--nnodes=8 --nproc-per-node=8 --node-rank=3 --rdzv-backend=c10d --rdzv-endpoint=10.65.0.10:29500 "
        f"--rdzv-id=prod --rdzv-conf=is_host=false --max-restarts=3 -m train.node.launch "
        f"--gate {prod3.dir}/.run/gate.test-pod --record {prod3.dir}/logs/health-node-3.test-pod.json "
    ), launch
    assert launch.endswith(" -- train/train.py"), launch
    env = prod3.train_env()
    assert (env["TRAINSTACK_SHARD_INDEX"], env["TRAINSTACK_NUM_SHARDS"]) == ("3", "8")
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "ens1"
    assert env["NCCL_DEBUG"] == "WARN"
    assert env["NCCL_IB_DISABLE"] == "1"  # the fake machine has no RDMA device
    assert "dry run: bucket resume s3://trainstack-prod-checkpoints/trainstack/prod/" in out
    assert "s3cr3t-value" not in out


def test_runpod_injected_variables_win(prod3: Node) -> None:
    injected = {
        "MASTER_ADDR": "10.65.9.9",
        "MASTER_PORT": "31000",
        "NODE_RANK": "5",
        "NUM_NODES": "8",
        "NUM_TRAINERS": "8",
        "WORLD_SIZE": "64",
    }
    code, out = prod3.run(**injected)
    assert code == 0, out
    train = prod3.torchrun_calls()[-1]
    assert "--node-rank=5 " in train and "--rdzv-endpoint=10.65.9.9:31000 " in train
    env = prod3.train_env()
    assert (env["MASTER_ADDR"], env["TRAINSTACK_SHARD_INDEX"]) == ("10.65.9.9", "5")


def test_primary_addr_is_honoured(prod3: Node) -> None:
    code, out = prod3.run(PRIMARY_ADDR="10.65.7.7", PRIMARY_PORT="32000")
    assert code == 0, out
    assert "--rdzv-endpoint=10.65.7.7:32000 " in prod3.torchrun_calls()[-1]


def test_world_size_mismatch_fails(prod3: Node) -> None:
    code, out = prod3.run(WORLD_SIZE="16")
    assert code != 0 and "WORLD_SIZE=16 but 8 nodes x 8 GPUs" in out


def test_interface_falls_back_to_eth1(prod3: Node) -> None:
    (prod3.dir / "net" / "ens1").rmdir()
    (prod3.dir / "net" / "eth1").mkdir()
    code, out = prod3.run()
    assert code == 0, out
    assert prod3.train_env()["NCCL_SOCKET_IFNAME"] == "eth1"


def test_interface_override_and_missing_fabric(prod3: Node) -> None:
    assert prod3.run(TRAINSTACK_FABRIC_IFNAME="ens3")[0] == 0
    assert prod3.train_env()["NCCL_SOCKET_IFNAME"] == "ens3"
    (prod3.dir / "net" / "ens1").rmdir()
    code, out = prod3.run()
    assert code != 0 and "no fabric interface (ens1 or eth1) on a 8-node job" in out


def test_rdma_present_keeps_ib_enabled(prod3: Node) -> None:
    (prod3.dir / "ib" / "mlx5_0").mkdir()
    assert prod3.run()[0] == 0
    assert "NCCL_IB_DISABLE" not in prod3.train_env()


def test_single_node_needs_no_fabric(tmp_path: Path) -> None:
    dev = Node(tmp_path, "dev", 0)
    (dev.dir / "net" / "ens1").rmdir()
    code, out = dev.run()
    assert code == 0, out
    assert "NCCL_SOCKET_IFNAME" not in dev.train_env()


def test_hosts_block_is_idempotent(prod3: Node) -> None:
    stale = "# >>> trainstack prod >>>\n10.9.9.9 node-0\n# <<< trainstack prod <<<\n"
    prod3.hosts.write_text(f"127.0.0.1 localhost\n{stale}::1 ip6\n")
    assert prod3.run()[0] == 0
    first = prod3.hosts.read_text()
    assert prod3.run()[0] == 0
    assert prod3.hosts.read_text() == first
    block = "".join(f"10.65.0.{10 + r} node-{r}\n" for r in range(8))
    assert first == (
        f"127.0.0.1 localhost\n::1 ip6\n# >>> trainstack prod >>>\n{block}# <<< trainstack prod <<<\n"
    )


def test_pool_pod_reads_all_data(tmp_path: Path) -> None:
    pod = Node(tmp_path, "search", 2)
    code, out = pod.run()
    assert code == 0, out
    env = pod.train_env()
    assert (env["TRAINSTACK_SHARD_INDEX"], env["TRAINSTACK_NUM_SHARDS"], env["TRAINSTACK_POD_INDEX"]) == (
        "0",
        "1",
        "2",
    )
    assert "--nnodes=1 " in pod.torchrun_calls()[-1] and "--rdzv-id=search-pod-2 " in pod.torchrun_calls()[-1]


def test_preflight_failures(prod3: Node) -> None:
    why = "node: all-reduce bus bandwidth 3.50 GB/s is under the floor of 100 GB/s; a node is off the fabric"
    code, out = prod3.run(FAKE_BUSBW="3.5", FAKE_PREFLIGHT_FAIL=why)
    assert code != 0 and f"FATAL: preflight: {why} (record: " in out
    assert not (prod3.dir / "train.env").exists()  # the workers never left the gate: no training
    code, out = prod3.run(TRAINSTACK_MIN_FREE_DISK_GB="999999999")
    assert code != 0 and "grow the disk" in out
    write_replay(prod3.replay, node_of(7))
    code, out = prod3.run()
    assert (
        code != 0
        and "FATAL: health gate: node: NVML sees 7 GPU(s), the stack expects 8; replace the cluster" in out
    )
    code, out = prod3.run(TRAINSTACK_DEVICE="cpu")
    assert code == 0 and "health gate skipped: no GPU: cpu test cluster" in out


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"ecc_uncorrected_volatile": 1}, "1 volatile uncorrected ECC error(s) since the driver loaded"),
        ({"remap_pending": True}, "a memory row remap is pending: it takes effect only after a GPU reset"),
        ({"xid_events": (79,)}, "XID error(s) 79 reported by the driver"),
        ({"pcie_width": 8}, "PCIe link trained at x8, the GPU supports x16"),
        ({"throttle_mask": 0x40}, "clocks held down by hw_thermal_slowdown"),
    ],
)
def test_a_node_with_a_recorded_fault_is_refused_with_one_line(
    tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    pod = Node(tmp_path, "search", 1)  # a pool pod: the fix is to replace the pod
    write_replay(pod.replay, with_fault(node_of(8), 4, **change))
    code, out = pod.run()
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert code != 0 and len(fatal) == 1, out
    assert f"FATAL: health gate: GPU 4 (00000000:1C:00.0): {reason}; replace this pod" in fatal[0]
    record = tmp_path / "logs" / "health-node-1.test-pod.json"
    assert f"(record: {record})" in fatal[0]
    assert not (tmp_path / "torchrun.log").exists()  # nothing was started on the sick node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_agent_runs_beside_training_and_stops_with_it(tmp_path: Path) -> None:
    node = Node(tmp_path, "prod", 0)
    port = _free_port()
    proc = node.start(
        FAKE_TRAIN_SLEEP="60", TRAINSTACK_METRICS_PORT=str(port), TRAINSTACK_METRICS_INTERVAL_S="1"
    )
    try:
        _wait_for(node.dir / "train.env")
        end, text = time.monotonic() + scaled(20), ""
        while "trainstack_storage_write_latency_seconds" not in text:
            assert time.monotonic() < end, "the agent never answered"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
            except OSError:
                time.sleep(0.1)
        assert 'trainstack_agent_nvml_up{node="test-pod",rank="0"} 0.0' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 143, out
    assert "GPU metrics off, serving storage and progress" in out
    with socket.socket() as s:  # the agent went with the script: nothing listens on its port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the scrape's TIME_WAIT is no listener
        s.bind(("127.0.0.1", port))
    env = node.train_env()
    assert env["TRAINSTACK_PROGRESS_FILE"] == f"{tmp_path}/metrics/progress-node-0.test-pod.jsonl"


@pytest.mark.parametrize("floor", ["nan", "-nan", "inf", "fast"])
def test_unparsable_floor_fails_the_preflight(prod3: Node, floor: str) -> None:
    """A floor that is not a number must stop the node, not compare as 0 and pass a 0.5 GB/s fabric."""
    code, out = prod3.run(TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S=floor, FAKE_BUSBW="0.5")
    assert code != 0 and "is not a number of GB/s" in out, out


def test_missing_secret_fails_without_printing_values(prod3: Node) -> None:
    code, out = prod3.run(HF_TOKEN="{{ RUNPOD_SECRET_trainstack-prod-hf_token }}")
    assert code != 0 and "secret HF_TOKEN did not reach this node" in out
    assert "s3cr3t-value" not in out


def test_the_secrets_file_gives_training_its_values_and_none_is_printed(prod3: Node) -> None:
    """delivery:SecretsFile's file (issue #67): sourced at the start, exported to the run, never printed; it
    wins over a `{{ RUNPOD_SECRET_... }}` an older trainstack left in the pod's env."""
    names = stack_config("prod").training.secrets
    values = {n: f"PLANTED-file-{n.lower()}-'$(touch pwned)" for n in names}
    (prod3.dir / "secrets").mkdir()
    (prod3.dir / "secrets" / "test-pod.env").write_text(render(values))
    stale = "{{ RUNPOD_SECRET_trainstack-prod-hf_token }}"
    code, out = prod3.run(**{**dict.fromkeys(names, ""), "HF_TOKEN": stale})
    assert code == 0, out
    assert (prod3.dir / "hf_token.seen").read_text() == values["HF_TOKEN"]
    assert not any(v in out for v in values.values()) and not (prod3.dir / "pwned").exists()
    (prod3.dir / "secrets" / "test-pod.env").write_text(
        render({k: v for k, v in values.items() if k != "WANDB_API_KEY"})
    )
    code, out = prod3.run(**dict.fromkeys(names, ""))
    assert code != 0 and "secret WANDB_API_KEY did not reach this node" in out and "test-pod.env" in out
    assert not any(v in out for v in values.values())


def test_every_node_uploads_its_own_checkpoints(prod3: Node) -> None:
    """torchrun's c10d rendezvous may put global rank 0 (the checkpoint writer) on any node (seen on two
    H200 nodes), so node 3 syncs its directory too, at the end and within a SIGTERM's notice."""
    code, out = prod3.run()
    assert code == 0 and "dry run: bucket sync" in out, out
    (prod3.dir / "train.env").unlink()  # appears again once this run's training has started
    proc = prod3.start(FAKE_TRAIN_SLEEP="60")
    _wait_for(prod3.dir / "train.env")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 143 and "dry run: bucket newest" in out, out


def test_the_sync_timer_runs_a_sync_only_for_a_checkpoint_it_has_not_synced(prod3: Node) -> None:
    """Issue #47: a sync is a Python process importing boto3 and a bucket listing, and most timer ticks
    found nothing new. The timer (every 0.02 s here) syncs once for what the directory holds, then again
    only once a new checkpoint appears; a second of training with nothing new after that adds no sync
    (without the skip it added ~50), and the final sync after training runs as always."""
    (prod3.dir / "ckpt" / "step-1.pt").write_bytes(b"1")
    stop = prod3.dir / "training-may-end"
    proc = prod3.start(
        TRAINSTACK_CHECKPOINT_INTERVAL_S="0.02", FAKE_TRAIN_UNTIL=str(stop), FAKE_TRAIN_AFTER_S="1"
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True)
    reader.start()
    seen: list[str] = []

    def next_sync() -> None:
        end = time.monotonic() + scaled(10.0)
        while True:
            line = lines.get(timeout=max(0.0, end - time.monotonic()))
            seen.append(line)
            if "dry run: bucket sync" in line:
                return

    try:
        next_sync()  # the first tick: step-1.pt
        (prod3.dir / "ckpt" / "step-2.pt").write_bytes(b"2")
        next_sync()  # a new name: synced
        stop.touch()
        proc.wait(timeout=30)
        reader.join(timeout=30)  # the script's output is read to its end
    finally:
        proc.kill()
    text = "".join(seen) + "".join(iter(lambda: "" if lines.empty() else lines.get(), ""))
    assert proc.returncode == 0, text
    assert text.count("dry run: bucket sync") == 3, text  # step-1, step-2, and the final sync


def test_training_failure_is_the_exit_status(prod3: Node) -> None:
    code, _ = prod3.run(FAKE_TRAIN_EXIT="7")
    assert code == 7


def _wait_for_line(node: Node, line: str, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + scaled(deadline_s)
    while line not in node.torchrun_calls():
        assert time.monotonic() < end, f"{line!r} never logged: {node.torchrun_calls()}"
        time.sleep(0.05)


def _wait_for(path: Path, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + scaled(deadline_s)
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


def test_sigterm_is_fast_and_uploads_newest(tmp_path: Path) -> None:
    """A spot pod has 5 s after SIGTERM. Judged by order, not by a stopwatch (a loaded machine is slow):
    the script exits while training, which here ignores the TERM, still runs, so it never waits for
    training; the only wait left is the upload, under `timeout` with a limit below 5 s."""
    assert TERM_UPLOAD_S < 5
    node = Node(tmp_path, "prod", 0)  # node 0 uploads
    proc = node.start(FAKE_TRAIN_SLEEP="60", FAKE_TRAIN_IGNORES_TERM="1")
    _wait_for(node.dir / "train.pid")
    training = int((node.dir / "train.pid").read_text())
    try:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)  # a deadline for a hung script, far below training's 60 s
        os.kill(training, 0)  # raises if training had ended: the script would have waited for it
        assert proc.returncode == 143, out
        assert "dry run: bucket newest" in out
        assert (
            f"TRAINSTACK_TERM_UPLOAD_S=${{TRAINSTACK_TERM_UPLOAD_S:-{TERM_UPLOAD_S}}}"
            in node.script.read_text()
        )
        _wait_for_line(node, "got-term")
    finally:
        os.kill(training, signal.SIGKILL)


def test_watchdog_stops_training(tmp_path: Path) -> None:
    node = Node(tmp_path, "prod", 0)
    code, out = node.run(FAKE_TRAIN_SLEEP="60", TRAINSTACK_MAX_RUN_S="1", TRAINSTACK_STOP_GRACE_S="1")
    assert code == 0, out
    assert "max run time reached" in out and "stopped at the max run time" in out
    assert (node.dir / "ckpt" / ".trainstack-stop").exists()
    assert "dry run: bucket sync" in out  # the final sync after training


def test_a_metrics_port_that_is_not_a_number_stops_the_node(prod3: Node) -> None:
    code, out = prod3.run(TRAINSTACK_METRICS_PORT="nine-four-hundred")
    assert code != 0 and "TRAINSTACK_METRICS_PORT='nine-four-hundred' is not a port" in out


def test_the_template_embeds_no_python() -> None:
    body = (REPO / "components" / "templates" / "start-node.body.bash").read_text()
    assert "<<'PY'" not in body and "<<PY" not in body
    assert not [line for line in body.splitlines() if line.lstrip().startswith(("import ", "from ", "def "))]
    # Every Python the script runs is a module of train/node/ (node_py, torchrun -m, python -m).
    modules = {"healthgate", "launch", "agent", "transfer"}
    assert all(f"train.node.{m}" in body or f"node_py {m}" in body for m in modules)


def test_burn_in_runs_on_a_new_node_only_and_the_flight_recorder_is_on(prod3: Node) -> None:
    """Issue #29: prod burns in for 10 min; the same node restarted skips it; the job gets the flight
    recorder's dump path and the heartbeat's folder."""
    code, out = prod3.run()
    assert code == 0, out
    first = next(c for c in prod3.torchrun_calls() if "train.node.launch" in c)
    assert "--burn-in-s 600" in first
    env = prod3.train_env()
    assert env["TRAINSTACK_HEARTBEAT_DIR"] == f"{prod3.dir}/.run/heartbeat"
    code, out = prod3.run()
    assert code == 0 and "burn-in skipped: this node passed it earlier in this run" in out
    again = [c for c in prod3.torchrun_calls() if "train.node.launch" in c][-1]
    assert "--burn-in-s 0" in again


def _run_logged(node: Node, path: str, **env: str) -> tuple[int, Path]:
    """The script as delivery starts it, its output in a log file (the exit record reads its tail there)."""
    log = node.dir / "start.log"
    with open(log, "w") as f:
        code = subprocess.run(
            ["bash", str(node.script)],
            env={**node.env, "PATH": path, **env},
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=30,
            check=False,
        ).returncode
    return code, log


def _exit_record(node: Node) -> dict[str, object]:
    found = sorted((node.dir / "metrics").glob("exit-node-*.test-pod.json"))
    assert len(found) == 1, found
    return dict(json.loads(found[0].read_text()))


def test_every_way_out_leaves_one_exit_record_with_phase_reason_and_tail(prod3: Node) -> None:
    """Issue #43's first run: no torchrun on the image. The record says failed at preflight, why, and the
    log's last lines (the shell's own `command not found` included), and holds no secret value."""
    bin_dir = prod3.dir / "bin"
    code, _ = _run_logged(prod3, f"{bin_dir}:/usr/bin:/bin")
    assert code == 0 and _exit_record(prod3)["status"] == "finished"
    assert _exit_record(prod3)["phase"] == "finish"
    (bin_dir / "torchrun").unlink()
    code, log = _run_logged(prod3, f"{bin_dir}:/usr/bin:/bin")
    record = _exit_record(prod3)
    assert code == 1 and (record["status"], record["phase"], record["exit_status"]) == (
        "failed",
        "preflight",
        1,
    )
    assert "preflight failed (exit 127)" in str(record["reason"])
    # Its run id and job, though `bucket` (which exports them) never ran: the bucket key of a run that never
    # started is run/<run id>/exit/<rank>.json, where scripts/supervise looks (issue #42).
    rendered = re.search(r"^TRAINSTACK_RUN_ID=\$\{TRAINSTACK_RUN_ID:-(.+)\}$", prod3.script.read_text(), re.M)
    assert rendered and record["run_id"] == rendered.group(1) and record["job"], record
    tail = record["log_tail"]
    assert isinstance(tail, list) and "FATAL: preflight failed (exit 127)" in tail[-1]
    assert any("torchrun: command not found" in line for line in tail)
    code, _ = _run_logged(prod3, f"{bin_dir}:/usr/bin:/bin", HF_TOKEN="{{ RUNPOD_SECRET_x }}")
    record = _exit_record(prod3)
    assert code == 1 and record["phase"] == "secrets" and "HF_TOKEN" in str(record["reason"])
    assert "s3cr3t-value" not in json.dumps(record) and "s3cr3t-value" not in log.read_text()
