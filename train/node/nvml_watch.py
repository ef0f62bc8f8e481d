"""Sample every GPU through NVML into a JSON-lines file until SIGTERM (the preflight's eyes on the GPUs).

    python -m train.node.nvml_watch --out FILE --interval-s 1

The preflight runs this beside its torch processes instead of calling NVML itself: on the H200 machine an
NVML reader inside the process that ran NCCL and the GEMMs crashed it (SIGSEGV, then "double free or
corruption") during the burn-in, while the same reads from a separate process ran clean. One line a sample:
{"t": <unix time>, "gpus": [GpuReading.to_json(), ...]}; a failed read is a line {"t", "error"}.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from train.node.nvml import GpuReading, NvmlSampler, SamplerError


def samples(path: Path, start: float, end: float) -> list[tuple[float, list[GpuReading]]]:
    """The (time, readings) lines of a watch file taken between `start` and `end` (Unix seconds)."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:  # the last line may be half written
            continue
        if "gpus" in obj and start <= obj["t"] <= end:
            out.append((obj["t"], [GpuReading.from_json(g) for g in obj["gpus"]]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.node.nvml_watch", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--interval-s", type=float, default=1.0)
    args = p.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        sampler = NvmlSampler()
    except SamplerError as exc:
        print(f"watch: {exc}", file=sys.stderr)
        return 1
    parent = os.getppid()
    with open(args.out, "a", encoding="utf-8") as f:
        while os.getppid() == parent:  # a preflight killed outright leaves no watcher behind
            now = time.time()
            try:
                line = {"t": now, "gpus": [r.to_json() for r in sampler.read()]}
            except SamplerError as exc:
                line = {"t": now, "error": str(exc)}
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
            f.flush()
            if stop.wait(args.interval_s):
                break
    sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
