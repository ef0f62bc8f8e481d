"""Fit the step-time constants (forecast/step.py) to the H200 sweep and judge them on the shapes left out.

`python -m bench.fit_sweep` (no GPU) reads docs/gpu-validation/2026-12-03-h200-sweep/sweep.json, fits
STEP_CONSTANTS by least squares on relative step-time error over all runs, then, for each of the sweep's
eight shapes, refits on the other seven and forecasts the one left out (leave-one-shape-out). It prints the
constants and, per run, measured and forecast tokens/s (fitted and held out) and peak memory. The earlier
full-depth runs (docs/gpu-validation/2026-12-01-h200-lora*, 16-32 layers) are forecast too, never fitted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from facts.gpus import GPUS
from forecast.model import Hardware, Workload
from forecast.stack import hardware
from forecast.step import STEP_CONSTANTS, features, step_parts

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = [
    ROOT / "docs/gpu-validation/2026-12-03-h200-sweep/sweep.json",
    ROOT / "docs/gpu-validation/2026-12-03-h200-sweep/sweep2.json",
]
EARLIER = [
    ROOT / "docs/gpu-validation/2026-12-01-h200-lora/lora.json",
    ROOT / "docs/gpu-validation/2026-12-01-h200-lora-validation/lora.json",
    ROOT / "docs/gpu-validation/2026-12-01-h200-lora8b/lora.json",
]
# The sweep's shapes as run (bench/gpu_sweep.py's SHAPES): hidden, layers, heads, kv heads, FFN, vocabulary
SHAPES: dict[str, tuple[int, int, int, int, int, int]] = {
    "1024": (1024, 8, 8, 8, 2816, 32000),
    "2048": (2048, 4, 16, 8, 8192, 128256),
    "3072": (3072, 4, 24, 8, 8192, 128256),
    "4096": (4096, 4, 32, 8, 14336, 128256),
    "4096m": (4096, 4, 32, 32, 11008, 32000),
    "5120": (5120, 3, 40, 40, 13824, 32000),
    "6144": (6144, 2, 48, 8, 16384, 32000),
    "8192": (8192, 2, 64, 8, 28672, 128256),
    "1024d": (1024, 24, 8, 8, 2816, 32000),  # the second call: deeper, for the per-layer accounting
    "2048d": (2048, 16, 16, 8, 8192, 128256),
    # the H100 call (issue #69, bench/gpu_sweep.py's LARGE_VOCAB): Qwen 2.5's widths and ~150k vocabulary
    "q896": (896, 6, 14, 2, 4864, 151936),
    "q1536": (1536, 4, 12, 2, 8960, 151936),
    "q3584": (3584, 4, 28, 4, 18944, 152064),
    "q1536d": (1536, 12, 12, 2, 8960, 151936),
    "v2048": (2048, 4, 16, 8, 8192, 151936),
}
# bench/gpu_lora.py's shapes, and bench/gpu_lora8b.py's variants
EARLIER_SHAPES: dict[str, tuple[int, int, int, int, int, int]] = {
    "1b": (2048, 16, 32, 8, 8192, 128256),
    "3b": (3072, 28, 24, 8, 8192, 128256),
    "7b": (4096, 32, 32, 32, 11008, 32000),
    "8b": (4096, 32, 32, 8, 14336, 128256),
}
METHODS = {"f": "full", "l": "lora", "full": "full", "lora": "lora"}
FITTED = tuple(STEP_CONSTANTS)


H100_SWEEP = ROOT / "docs/gpu-validation/2026-12-07-h100/sweep.json"


def h200() -> Hardware:
    return hardware(GPUS["H200_SXM"])


def h100() -> Hardware:
    return hardware(GPUS["H100_SXM"])


def h100_runs() -> list[dict[str, Any]]:
    """The H100 call's completed runs (issue #69), named as the H200 sweep's: bench/gpu_sweep.py's `w4096mha`
    is `4096m` here, `w1024` is `1024`; `call` is "h100"."""
    runs = []
    for index, r in enumerate(json.loads(H100_SWEEP.read_text())["runs"]):
        if "step_s" in r:
            shape = str(r["shape"]).removeprefix("w").replace("mha", "m")
            runs.append({**r, "shape": shape, "call": "h100", "index": index})
    return runs


def workload(run: dict[str, Any], shapes: dict[str, tuple[int, int, int, int, int, int]]) -> Workload:
    """The forecast's workload of one recorded run (a LoRA run's parameters are its frozen base)."""
    h, layers, heads, kv, ffn, vocab = shapes[run["shape"]]
    method = METHODS[run.get("method", run.get("mode", ""))]
    base = run["params"] - (run["trainable"] if method == "lora" else 0)
    return Workload(
        parameters=float(base),
        tokens=1e9,
        method=method,  # type: ignore[arg-type]
        trainable_fraction=1.0 if method == "full" else run["trainable"] / base,
        precision="bf16",
        optimizer="adamw",
        sharding="ddp",
        layers=layers,
        hidden_size=h,
        attention_heads=heads,
        vocab_size=vocab,
        sequence_length=run["s"],
        micro_batch_per_gpu=run["b"],
        activation_checkpointing=bool(run["ckpt"]),
        flash_attention=True,
        mfu=None,
        overhead=0.0,
        kv_heads=kv,
        ffn_hidden_size=ffn,
    )


def sweep_runs() -> list[dict[str, Any]]:
    """Every completed run of both calls, each named by its call and index (`call`, `index`)."""
    runs = []
    for call, path in enumerate(SWEEPS, 1):
        for index, r in enumerate(json.loads(path.read_text())["runs"]):
            if "step_s" in r:
                runs.append({**r, "call": call, "index": index})
    return runs


def width(run: dict[str, Any]) -> str:
    """The group a run is held out with: its width family (1024 and 1024d are one)."""
    return str(run["shape"]).rstrip("d")


def earlier_runs() -> list[dict[str, Any]]:
    """The earlier full-depth full and LoRA runs (not frozen bases, not the profiled repeats)."""
    runs = []
    for path in EARLIER:
        for r in json.loads(path.read_text())["runs"]:
            keep = r.get("mode") in ("full", "lora") and r.get("shape") in EARLIER_SHAPES
            if keep and "step_s" in r and not r.get("profiled") and r.get("s", 2048):
                runs.append(r)
    return runs


def _solve(a: list[list[float]], y: list[float]) -> list[float]:
    """Least squares by the normal equations, Gauss-Jordan with partial pivoting (a handful of unknowns)."""
    n = len(a[0])
    m = [
        [sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * v for r, v in zip(a, y, strict=True))]
        for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(m[i][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(n):
            if i != col and m[col][col]:
                factor = m[i][col] / m[col][col]
                m[i] = [x - factor * z for x, z in zip(m[i], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


HOST = ("host",)
BUSY = tuple(k for k in FITTED if k not in HOST)
HOST_GRID = [0.5 + 0.025 * i for i in range(29)]  # the sweep's host at 0.5-1.2 of the host call's
BOUND = 0.7  # a run whose host time is over 0.7 of its step does not fit the GPU's constants
HOST_RUNS = ROOT / "docs/gpu-validation/2026-12-03-h200-host/host.json"


def _features(run: dict[str, Any]) -> tuple[dict[str, float], float]:
    """A run's features and its adapter seconds (fixed, not fitted)."""
    w, gpu = workload(run, SHAPES), h200()
    return features(w, gpu), step_parts(w, gpu, constants=dict.fromkeys(FITTED, 0.0)).total


def _fit_busy(rows: list[tuple[dict[str, float], float, float]], fixed: dict[str, float]) -> dict[str, float]:
    """The GPU's constants by least squares on relative step time; rows: (features, adapters, step)."""
    free = [k for k in BUSY if k not in fixed]
    a, y = [], []
    for f, adapters, step in rows:
        known = adapters + sum(fixed[k] * f[k] for k in fixed if k in BUSY)
        a.append([f[k] / step for k in free])
        y.append(1.0 - known / step)
    solved = dict(zip(free, _solve(a, y), strict=True)) if a else {}
    return {k: fixed.get(k, solved.get(k, 0.0)) for k in BUSY}


def _step(f: dict[str, float], adapters: float, c: dict[str, float]) -> float:
    """forecast/step.py's step: the GPU's parts, or the host's time and the optimizer launched after it."""
    busy = adapters + sum(c[k] * f[k] for k in BUSY)
    return max(busy, c["host"] * f["host"] + c["optimizer"] * f["optimizer"])


def fit(runs: list[dict[str, Any]], fixed: dict[str, float] | None = None) -> dict[str, float]:
    """STEP_CONSTANTS fitted to `runs`: for each host scale on a grid, the GPU's constants on the runs whose
    host time is under BOUND of the measured step, keeping the scale with the least squared relative error
    over all runs."""
    fixed = fixed or {}
    rows = [(*_features(r), r["step_s"]) for r in runs]
    best: tuple[float, dict[str, float]] = (float("inf"), {})
    for scale in [fixed["host"]] if "host" in fixed else HOST_GRID:
        free = [x for x in rows if scale * x[0]["host"] < BOUND * x[2]]
        c = {**_fit_busy(free, fixed), "host": scale}
        error = sum((_step(f, ad, c) / step - 1) ** 2 for f, ad, step in rows)
        if error < best[0]:
            best = (error, c)
    return best[1]


def host_runs() -> list[dict[str, Any]]:
    """The host call's runs (bench/gpu_host.py): the host's time and the kernels of each step."""
    return [r for r in json.loads(HOST_RUNS.read_text())["runs"] if "host_s" in r]


def host_seconds() -> dict[str, float]:
    """forecast.step.HOST_SECONDS: the host's seconds per kernel, per checkpointed layer and per peft layer,
    least squares on relative error over the host call's readings of the host's time."""
    a, y = [], []
    for r in host_runs():
        row = [r["kernels"], r["layers"] * r["ckpt"], r["layers"] * (r["method"] == "lora")]
        a.append([v / r["host_s"] for v in row])
        y.append(1.0)
    return dict(zip(("kernel", "checkpoint_layer", "peft_layer"), _solve(a, y), strict=True))


def kernel_counts() -> dict[tuple[str, bool], tuple[float, float]]:
    """forecast.step.HOST_KERNELS: kernels a step launches, fixed + per layer, from the 1024-wide host runs
    (least squares over their depths)."""
    out = {}
    for method in ("full", "lora"):
        for ckpt in (False, True):
            pts = [
                (r["layers"], r["kernels"])
                for r in host_runs()
                if r["shape"] == "w1024" and r["method"] == method and bool(r["ckpt"]) == ckpt and r["b"] == 1
            ]
            mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
            slope = sum((x - mx) * (k - my) for x, k in pts) / sum((x - mx) ** 2 for x, _ in pts)
            out[(method, ckpt)] = (my - slope * mx, slope)
    return out


def forecast_step(
    run: dict[str, Any], constants: dict[str, float], shapes: Any = None, gpu: Hardware | None = None
) -> float:
    return step_parts(workload(run, shapes or SHAPES), gpu or h200(), constants=constants).total


def name(run: dict[str, Any]) -> str:
    ckpt = "ckpt" if run["ckpt"] else "nockpt"
    return f"{run['shape']}-{METHODS[run['method']]}-{ckpt}-b{run['b']}-s{run['s']}"


def held_out(runs: list[dict[str, Any]], fixed: dict[str, float]) -> dict[str, float]:
    """Each run's forecast step time from constants fitted without its width family."""
    out: dict[str, float] = {}
    for group in sorted({width(r) for r in runs}):
        c = fit([r for r in runs if width(r) != group], fixed)
        out.update({f"{r['call']}.{r['index']}": forecast_step(r, c) for r in runs if width(r) == group})
    return out


def main() -> None:
    runs = sweep_runs()
    fixed = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    constants = fit(runs, fixed)
    print("host seconds (host call):", {k: f"{v:.4g}" for k, v in host_seconds().items()})
    print("kernels (host call):", {k: (round(a, 1), round(b, 1)) for k, (a, b) in kernel_counts().items()})
    print("constants (all runs):", {k: round(v, 6) for k, v in constants.items()})
    held: dict[int, float] = {}
    for group in sorted({width(r) for r in runs}):
        rest = [r for r in runs if width(r) != group]
        c = fit(rest, fixed)
        print(f"  without {group}:", {k: round(v, 5) for k, v in c.items()})
        for i, r in enumerate(runs):
            if width(r) == group:
                held[i] = forecast_step(r, c)
    worst_fit = worst_held = 0.0
    for i, r in enumerate(runs):
        fitted = forecast_step(r, constants) / r["step_s"]
        out = held[i] / r["step_s"]
        worst_fit, worst_held = max(worst_fit, abs(fitted - 1)), max(worst_held, abs(out - 1))
        name = f"{r['shape']}-{METHODS[r['method']]}-{'ckpt' if r['ckpt'] else 'nockpt'}-b{r['b']}-s{r['s']}"
        print(f"{name:34s} {r['tokens_per_s']:9.0f} fitted {fitted:5.2f} held-out {out:5.2f}")
    print(f"worst: fitted {worst_fit:.3f}, held out {worst_held:.3f}")
    for r in earlier_runs():
        ratio = forecast_step(r, constants, EARLIER_SHAPES) / r["step_s"]
        print(f"earlier {r['shape']}-{r['mode']}-ck{r['ckpt']}-b{r['b']}-s{r.get('s', 2048)}: {ratio:5.2f}")


if __name__ == "__main__":
    main()
