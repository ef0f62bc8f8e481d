"""Why the 8B LoRA runs ran 12-16 % faster than forecast: its frozen base, measured, on one GPU.

Runs on the GPU machine from the repository root (python3 with torch, transformers and peft), packed into
one device command by `python -m bench.gpu_lora_pack 8b` (bench/pack.py). It runs bench/gpu_lora.py's own
harness, not a copy: it executes that file's code up to its plans (the shapes, the `run` function: build
at random on the GPU, bf16 frozen base, SDPA, bf16 autocast, random tokens as inputs and labels, fused
AdamW on what trains, 2 warm-up steps then the median of 6 timed steps, the memory readings), so the
figures compare with the runs of docs/gpu-validation/2026-12-01-h200-lora*; the file's SHA-256 goes into
the record. "frozen" is the base with no adapters (gradients flowing from the embeddings' output: the
frozen base's own cost); "lora" is peft on all seven projections, alpha 2r, no dropout.

What it adds to the earlier runs:
- the 8B frozen base with and without activation checkpointing (there was none), with the 7B again on the
  same machine as a control;
- three 8B variants, each with one factor moved to the 7B's value (32 key-value heads; FFN 11008;
  vocabulary 32000), frozen and checkpointed: which factor makes the 8B base fast or slow;
- the 8B at rank 64, and at micro-batch 4 without checkpointing; frozen 3B and 1.5B bases;
- four runs again under torch.profiler (their timing is not used: `profiled` in the record), each CUDA
  kernel's total µs, name and calls over the run's 8 steps, so a step splits into matmuls, attention and
  the rest.

$OUT/lora.json holds every run, written after each one (a call cut short keeps the runs before it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HARNESS = Path("bench/gpu_lora.py")
# The 8B with one factor moved to the 7B's value: h, L, heads, key-value heads, FFN, V (bench/gpu_lora.py's S)
VARIANTS = {
    "8b-kv32": (4096, 32, 32, 32, 14336, 128256),
    "8b-ffn11008": (4096, 32, 32, 8, 11008, 128256),
    "8b-v32000": (4096, 32, 32, 8, 14336, 32000),
}
# shape, mode, rank, checkpointing, micro-batch (bench/gpu_lora.py's `run`); the most telling first
PLAN = [
    ("8b", "frozen", 0, 1, 4),
    ("8b", "frozen", 0, 0, 2),
    ("8b", "lora", 16, 0, 2),
    ("8b", "lora", 16, 1, 4),
    ("7b", "frozen", 0, 1, 4),
    ("7b", "lora", 16, 1, 4),
    ("7b", "frozen", 0, 0, 2),
    ("7b", "lora", 16, 0, 2),
    ("8b-kv32", "frozen", 0, 1, 4),
    ("8b-ffn11008", "frozen", 0, 1, 4),
    ("8b-v32000", "frozen", 0, 1, 4),
    ("8b", "lora", 64, 1, 4),
    ("8b", "lora", 16, 0, 4),
    ("8b", "frozen", 0, 0, 4),
    ("3b", "frozen", 0, 1, 8),
    ("3b", "frozen", 0, 0, 4),
    ("1b", "frozen", 0, 0, 4),
]
PROFILED = [
    ("8b", "frozen", 0, 1, 4),
    ("7b", "frozen", 0, 1, 4),
    ("8b", "lora", 16, 1, 4),
    ("7b", "lora", 16, 1, 4),
]
KERNELS_KEPT = 60


def main() -> None:
    source = HARNESS.read_text()
    harness: dict[str, Any] = {}
    # the imports, shapes, record and `run` of the committed harness, not its plans
    exec(source[: source.index("\nP=[")], harness)  # noqa: S102
    harness["S"].update(VARIANTS)
    record, run, torch = harness["R"], harness["run"], harness["torch"]
    record["harness_sha256"] = hashlib.sha256(source.encode()).hexdigest()
    record["versions"] = {m: __import__(m).__version__ for m in ("transformers", "peft")}
    for planned in PLAN:
        run(*planned)
    from torch.profiler import ProfilerActivity, profile

    for planned in PROFILED:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run(*planned)
            torch.cuda.synchronize()
        kernels = [
            (e.device_time_total, e.key[:90], e.count)
            for e in prof.key_averages()
            if "CUDA" in str(e.device_type)
        ]
        kernels.sort(reverse=True)
        entry = record["runs"][-1]
        total = sum(k[0] for k in kernels)
        entry.update(profiled=True, kernel_us_total=total, kernels=kernels[:KERNELS_KEPT])
        Path(harness["O"], "lora.json").write_text(json.dumps(record, indent=1))


main()
