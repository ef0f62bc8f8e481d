"""The goodput-ledger run on one GPU machine: the project's own job path, two faults, records.

Runs on the GPU machine from the repository root (python3 with torch; stdlib here), packed into one device
command by `python -m bench.gpu_ledger pack`. What a node's start script does, step by step, with the
project's own modules: synthetic token shards (train/shards.py), the NVML health gate
(train/node/healthgate.py), the torchrun preflight with burn-in (train/node/preflight.py), then
`train/gpt_train.py` under torchrun with the progress contract on. Two faults are induced:

    start 1   gate, preflight with a burn-in of BURN_IN_S, train; SIGTERM once the step passes TERM_AT
              (a preemption: the job checkpoints at its stop step, so no work is lost)
    start 2   gate, preflight without burn-in (the node passed it in this run), resume; SIGKILL of the whole
              job once the step passes KILL_AT (a crash: nothing is saved, so the steps since the newest
              checkpoint are trained twice)
    start 3   gate, preflight, resume from the newest checkpoint, train to STEPS

Records under $OUT (what bench/gpu_ledger.py builds the ledger from):
    events.jsonl    one line per phase begun/done and per fault, with the Unix time (the audit log's part)
    progress.jsonl  the job's progress contract lines (train/node/progress.py)
    health.json     the node's health record (train/node/healthrecord.py)
    log.txt         every tool's output
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

OUT = Path(os.environ.get("OUT", "out"))
CKPT, DATA = Path("/tmp/ledger/checkpoints"), Path("/tmp/ledger/tokens")
EVENTS, PROGRESS, RECORD, LOG = (
    OUT / n for n in ("events.jsonl", "progress.jsonl", "health.json", "log.txt")
)
MODEL, MICRO_BATCH, STEPS, EVERY, LOG_EVERY = "gpt-124m", 16, 1000, 200, 20
BURN_IN_S = 60
TERM_AT, KILL_AT = 300, 520
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
ENV = os.environ | {
    "PYTHONPATH": os.getcwd(),
    "NCCL_NVLS_ENABLE": "0",  # NVLink multicast stays off (the lender's rule)
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TRAINSTACK_CHECKPOINT_DIR": str(CKPT),
    "TRAINSTACK_DATA_DIR": str(DATA),
    "TRAINSTACK_PROGRESS_FILE": str(PROGRESS),
}


def event(name: str, **fields: Any) -> None:
    with EVENTS.open("a") as f:
        f.write(json.dumps({"t": time.time(), "event": name, **fields}) + "\n")


def phase(name: str, argv: list[str], **fields: Any) -> int:
    """Run one step to its end between a begun and a done event."""
    event(name + "_begun", **fields)
    with LOG.open("a") as log:
        rc = subprocess.run(argv, stdout=log, stderr=log, env=ENV).returncode
    event(name + "_done", rc=rc, **fields)
    return rc


def newest_step() -> int:
    lines = PROGRESS.read_text().splitlines() if PROGRESS.exists() else []
    return int(json.loads(lines[-1])["step"]) if lines else -1


def watch_checkpoints(stop: threading.Event) -> None:
    """When each checkpoint's temp file was first seen and its final name appeared (torch.save's part of a
    checkpoint; the ledger infers the whole stall from the progress lines, this is the cross-check)."""
    seen: set[str] = set()
    while not stop.wait(0.02):
        for name in set(os.listdir(CKPT)) - seen:
            seen.add(name)
            event("checkpoint_file", file=name)


def start(run: int, fault: str | None = None, at: int = 0) -> bool:
    """One start of the job as the start script makes it; `fault` is sent once the step passes `at`.
    False when the node failed its gate or preflight (no training then)."""
    record = f"--record={RECORD}"
    if phase("gate", [sys.executable, "-m", "train.node.healthgate", record, "--expected-gpus=1"], run=run):
        return False
    burn = BURN_IN_S if run == 1 else 0
    flight = [record, "--gemm-floor-tflops=495", f"--burn-in-s={burn}"]
    if phase("preflight", [*TORCHRUN, "-m", "train.node.preflight", *flight], run=run, burn_in_s=burn):
        return False
    job = [f"--model={MODEL}", f"--micro-batch={MICRO_BATCH}", f"--steps={STEPS}"]
    job += [f"--checkpoint-every={EVERY}", f"--log-every={LOG_EVERY}"]
    event("train_begun", run=run, checkpoint_every=EVERY)
    with LOG.open("a") as log:
        proc = subprocess.Popen([*TORCHRUN, "train/gpt_train.py", *job], stdout=log, stderr=log, env=ENV)
        while proc.poll() is None:
            if fault and newest_step() >= at:
                event("fault", run=run, how=fault, step=newest_step())
                if fault == "SIGTERM":
                    proc.send_signal(signal.SIGTERM)  # torchrun passes it to the job, which checkpoints
                else:  # a crash: the job's process (torchrun's child) dies at once, as on a GPU fault
                    for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split():
                        os.kill(int(pid), signal.SIGKILL)
                fault = None
            time.sleep(0.05)
    event("train_done", run=run, rc=proc.returncode, checkpoints=sorted(os.listdir(CKPT)))
    return True


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    CKPT.mkdir(parents=True, exist_ok=True)
    event("node_up")
    phase("data", [sys.executable, "-m", "train.shards", str(DATA), "--shards=1"])
    stop = threading.Event()
    threading.Thread(target=watch_checkpoints, args=(stop,), daemon=True).start()
    for run, fault, at in ((1, "SIGTERM", TERM_AT), (2, "SIGKILL", KILL_AT), (3, None, 0)):
        if not start(run, fault, at):
            break  # the gate or the preflight refused the node: the start script stops there too
    stop.set()
    event("records_done")


if __name__ == "__main__":
    main()
