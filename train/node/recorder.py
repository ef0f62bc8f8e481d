"""Record real NVML readings for the tests to replay: idle, then under a bf16 GEMM on every GPU.

    python3 -m train.node.recorder --machine "nvidia-h200-x2" --out recording.json

Writes a `Recording` (train/node/nvml.py) with the date, the machine and the driver. The load snapshot is
taken while every GPU multiplies (torch, one thread a GPU), so it shows clocks, power and PCIe under load.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from train.node.nvml import NvmlSampler, Recording


def _load(stop: threading.Event, gpu: int) -> None:
    import torch

    dev = torch.device(f"cuda:{gpu}")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(10):
            torch.mm(a, a)
        torch.cuda.synchronize(dev)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m train.node.recorder", description=__doc__.splitlines()[0])
    p.add_argument("--machine", required=True, help="what the readings come from, e.g. nvidia-h200-x2")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--load-s", type=float, default=4.0, help="seconds of GEMM before the load snapshot")
    args = p.parse_args(argv)
    sampler = NvmlSampler()
    snaps = {"idle": sampler.read()}
    stop = threading.Event()
    threads = [threading.Thread(target=_load, args=(stop, g.index)) for g in snaps["idle"]]
    for t in threads:
        t.start()
    time.sleep(args.load_s)  # a recording tool, not a test: the GPUs need a few seconds to reach load
    snaps["load"] = sampler.read()
    stop.set()
    for t in threads:
        t.join()
    names = sorted({g.name for g in snaps["idle"]})
    rec = Recording(
        recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        machine=f"{args.machine} ({len(snaps['idle'])} x {', '.join(names)}, driver {sampler.driver})",
        driver=sampler.driver,
        snapshots=snaps,
    )
    sampler.close()
    args.out.write_text(json.dumps(rec.to_json(), indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(snaps['idle'])} GPU(s) into {args.out}: {rec.machine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
