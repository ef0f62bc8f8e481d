"""A GPU's own figures for the health gate and the forecast: bf16 GEMM rates and HBM bandwidth (issue #69).

Runs on the GPU machine from the repository root (python3 with torch): `python3 bench/gpu_figures.py`
writes $OUT/figures.json. What it reads, in this order:

- gate: the straggler test's own measurement (train/node/preflight.py's `_gemm_tflops`: bf16 8192³ for 3 s
  on random data), repeated GATE_REPEATS times: the spread a healthy GPU shows across the gate's runs;
- groups: the same product timed in groups of ten with CUDA events over GROUP_SECONDS: the spread within a
  run (the gate's 3 s average hides it), and the clock's drift as the GPU warms;
- shapes: the step model's GEMMs (forecast/shapes.py: q, k, up, down and the head of each sweep width, m =
  8192 tokens), median of TIMED products after WARMUP, on random data; the forecast's roofline per GEMM is
  computed beside the records, not here (the device has no project venv);
- copy: a device-to-device copy of COPY_BYTES, counting bytes read and written (the forecast's bandwidth).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from train.node import preflight

OUT = Path(os.environ.get("OUT", "."))
GATE_REPEATS = int(os.environ.get("FIGURES_GATE_REPEATS", "8"))
GROUP_SECONDS = 20.0
WARMUP, TIMED = 5, 30
COPY_BYTES = 4 << 30
# name: hidden, kv width, FFN, vocabulary (bench/gpu_sweep.py's shapes; kv width = kv heads x 128)
SHAPES = {
    "w1024": (1024, 1024, 2816, 32000),
    "w2048": (2048, 1024, 8192, 128256),
    "w4096": (4096, 1024, 14336, 128256),
    "w5120": (5120, 5120, 13824, 32000),
    "w8192": (8192, 1024, 28672, 128256),
}
TOKENS = 8192


def _events_ms(fn: Any, warmup: int, timed: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def gate() -> list[float]:
    """The straggler test's figure, as the gate computes it, GATE_REPEATS times."""
    ctx = SimpleNamespace(device=torch.device("cuda"))
    return [round(preflight._gemm_tflops(ctx, 3.0), 1) for _ in range(GATE_REPEATS)]  # type: ignore[arg-type]


def groups() -> list[float]:
    """TFLOPS of each group of ten 8192³ products over GROUP_SECONDS (CUDA events)."""
    n = preflight.GEMM_N
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)

    def ten() -> None:
        for _ in range(10):
            torch.mm(a, b, out=c)

    rates, begin = [], time.monotonic()
    while time.monotonic() - begin < GROUP_SECONDS:
        for ms in _events_ms(ten, 0, 20):
            rates.append(round(10 * 2 * n**3 / (ms / 1e3) / 1e12, 1))
    return rates


def shapes() -> list[dict[str, Any]]:
    rows = []
    for name, (h, kv, ffn, vocab) in SHAPES.items():
        for gemm, n, k in (("q", h, h), ("k", kv, h), ("up", ffn, h), ("down", h, ffn), ("head", vocab, h)):
            a = torch.randn(TOKENS, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(TOKENS, n, device="cuda", dtype=torch.bfloat16)
            ms = statistics.median(_events_ms(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), WARMUP, TIMED))
            tflops = 2 * TOKENS * n * k / (ms / 1e3) / 1e12
            row = dict(shape=name, gemm=gemm, m=TOKENS, n=n, k=k, ms=round(ms, 4), tflops=round(tflops, 1))
            rows.append(row)
            del a, b, c
    return rows


def copy() -> dict[str, Any]:
    src = torch.randn(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    times = _events_ms(lambda: dst.copy_(src), WARMUP, TIMED)
    ms = statistics.median(times)
    return {
        "bytes": COPY_BYTES,
        "median_ms": round(ms, 3),
        "tb_per_s": round(2 * COPY_BYTES / (ms / 1e3) / 1e12, 3),  # read + written
        "min_ms": round(min(times), 3),
        "max_ms": round(max(times), 3),
    }


def main() -> None:
    record: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, part in (("copy", copy), ("gate", gate), ("groups", groups), ("shapes", shapes)):
        began = time.monotonic()
        record[name] = part()
        record[f"{name}_s"] = round(time.monotonic() - began, 1)
        (OUT / "figures.json").write_text(json.dumps(record, indent=1))
        print(name, json.dumps(record[name])[:400], flush=True)


if __name__ == "__main__":
    main()
