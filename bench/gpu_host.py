"""The host's share of a training step (the held-out misses): launches, host time, SM clock.

Runs on the GPU machine from the repository root (python3 with torch, transformers and peft):
`PYTHONUNBUFFERED=1 python3 bench/gpu_host.py` writes $OUT/host.json after every run. Each run is
bench/gpu_sweep.py's (the same build, fused AdamW, bf16 autocast, 2 warm-up steps) with three more readings:

- `host_s`: per timed step, the seconds until `zero_grad` returns, before the closing synchronize: what the
  host's Python and kernel launches take. In a host-bound step it is the step; in a GPU-bound one less.
- `kernels`: CUDA kernels one step launches (torch.profiler, one extra step after the timed ones), so the
  host time can be judged per launch rather than per layer.
- `sm_mhz`, `power_w`: NVML's SM clock and power, sampled every 20 ms over the timed steps (a long run of
  large GEMMs may hold the H200 at its power limit below its boost clock).

The plan: widths 1024 and 2048 at several depths (the host-bound steps), b = 1, s = 1024, full and LoRA,
checkpointed or not; and the sweep's GPU-bound misses repeated beside two runs that fit.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import torch

from bench import gpu_sweep

OUT = Path(os.environ.get("OUT", "."))
BUDGET_S = float(os.environ.get("HOST_BUDGET_S", "500"))
WARMUP, TIMED = 2, 8
# (shape, layers built, method, ckpt, b, s)
PLAN: list[tuple[str, int, str, int, int, int]] = [
    *[
        (shape, layers, method, ckpt, 1, 1024)
        for shape, depths in (("w1024", (2, 8, 24)), ("w2048", (4, 16)))
        for layers in depths
        for method in ("full", "lora")
        for ckpt in (0, 1)
    ],
    ("w4096", 4, "full", 0, 1, 1024),
    ("w4096", 4, "lora", 0, 1, 1024),
    ("w8192", 2, "lora", 0, 1, 1024),
    ("w8192", 2, "full", 1, 1, 1024),
    ("w8192", 2, "lora", 1, 8, 2048),
    ("w8192", 2, "full", 1, 1, 8192),
    ("w4096", 4, "full", 0, 2, 2048),
    ("w1024", 8, "full", 0, 16, 1024),
]


class Sampler(threading.Thread):
    """NVML's SM clock (MHz) and power (W) every 20 ms until stopped; empty where NVML is missing."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.clocks: list[float] = []
        self.power: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            return
        while not self.stop.wait(0.02):
            self.clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            self.power.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)


def kernels(step: Any) -> int:
    """CUDA kernels one call of `step` launches, counted by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def train_step(model: Any, optimizer: Any, tokens: Any) -> None:
    with torch.autocast("cuda", torch.bfloat16):
        loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def run(shape: str, layers: int, method: str, ckpt: int, b: int, s: int) -> dict[str, Any]:
    h, _, heads, kv, ffn, vocab = gpu_sweep.SHAPES[shape]
    entry: dict[str, Any] = dict(shape=shape, layers=layers, method=method, ckpt=ckpt, b=b, s=s, hidden=h)
    gpu_sweep.SHAPES[f"{shape}-{layers}"] = (h, layers, heads, kv, ffn, vocab)
    model = optimizer = tokens = None
    try:
        model = gpu_sweep.build(f"{shape}-{layers}", method, ckpt, s)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        entry["params"] = sum(p.numel() for p in model.parameters())
        entry["trainable"] = sum(p.numel() for p in trainable)
        optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=True)
        tokens = torch.randint(0, vocab, (b, s), device="cuda")

        step = functools.partial(train_step, model, optimizer, tokens)

        times, hosts = [], []
        sampler = Sampler()
        for i in range(WARMUP + TIMED):
            if i == WARMUP:
                gc.collect()
                sampler.start()
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            hosts.append(time.perf_counter() - start)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        sampler.stop.set()
        entry.update(step_s=statistics.median(times[WARMUP:]), steps_s=times[WARMUP:])
        entry.update(host_s=statistics.median(hosts[WARMUP:]), hosts_s=hosts[WARMUP:])
        entry["tokens_per_s"] = b * s / entry["step_s"]
        if sampler.clocks:
            entry.update(sm_mhz=statistics.median(sampler.clocks), power_w=statistics.median(sampler.power))
        entry["kernels"] = kernels(step)
    except torch.OutOfMemoryError as error:
        entry["oom"] = str(error)[:300]
    except Exception as error:
        entry["error"] = repr(error)[:500]
    del model, optimizer, tokens
    gc.collect()
    torch.cuda.empty_cache()
    return entry


def main() -> None:
    import peft
    import transformers

    record: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "warmup": WARMUP,
        "timed": TIMED,
        "runs": [],
    }
    begin = time.monotonic()
    for planned in PLAN:
        if time.monotonic() - begin > BUDGET_S:
            record["cut_at"] = list(planned)
            break
        entry = run(*planned)
        entry["wall_s"] = round(time.monotonic() - begin, 1)
        record["runs"].append(entry)
        (OUT / "host.json").write_text(json.dumps(record, indent=1))
        print({k: v for k, v in entry.items() if k not in ("steps_s", "hosts_s")}, flush=True)


if __name__ == "__main__":
    main()
