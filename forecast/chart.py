"""`scripts/forecast --png FILE`: the forecast as pictures. With `--compare`, run cost against hours of every
GPU type, node count and sharding RunPod rents (feasible filled, the rest hollow, the stack as configured and
the cheapest feasible one marked); without, the memory per GPU as one bar of its parts against the GPU's
memory and the forecast's band (issue #68: everything was a table).

matplotlib draws them (the project's `test` group; `scripts/bootstrap` installs it); where it is missing,
`ChartError` says how to get it and the text forecast is printed as ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forecast.compare import Comparison

# The memory parts, bottom to top, as the forecast's output names them (others it adds are drawn after them).
PARTS = ("weights", "gradients", "optimizer", "activations", "gather_buffers", "allowance")
_NOT_PARTS = ("total", "total_low", "total_high", "gpu", "headroom")


class ChartError(RuntimeError):
    """No picture could be drawn (matplotlib missing); the message says how to get it."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise ChartError(
            "--png needs matplotlib, which this environment lacks; install it with `uv sync --group test` "
            "(scripts/bootstrap does), or leave --png out for the tables"
        ) from None
    return plt


def compare_chart(stack: str, comparison: Comparison, path: Path) -> Path:
    """Run cost (USD, log) against hours (log) of every option; one colour a GPU type."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    gpus = sorted({o.gpu for o in comparison.options})
    colours = {g: plt.get_cmap("tab10")(i % 10) for i, g in enumerate(gpus)}
    for gpu in gpus:
        mine = [o for o in comparison.options if o.gpu == gpu]
        fits = [o for o in mine if o.feasible]
        not_fits = [o for o in mine if not o.feasible]
        if fits:
            ax.scatter([o.hours for o in fits], [o.run_usd for o in fits], color=colours[gpu], s=28,
                       label=f"{gpu} (fits)")  # fmt: skip
        if not_fits:
            ax.scatter([o.hours for o in not_fits], [o.run_usd for o in not_fits], facecolors="none",
                       edgecolors=colours[gpu], s=28, alpha=0.6, label=f"{gpu} (does not fit)")  # fmt: skip
    c = comparison.configured
    ax.scatter([c.hours], [c.run_usd], marker="*", s=260, color="black", label=f"configured: {c.label}")
    best = comparison.cheapest
    if best is not None:
        ax.scatter([best.hours], [best.run_usd], marker="D", s=90, facecolors="none", edgecolors="green",
                   linewidths=2, label=f"cheapest feasible: {best.label} ${best.run_usd:,.0f}")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hours of the run")
    ax.set_ylabel("run cost, USD (on-demand)")
    ax.set_title(f"{stack}: run cost against hours, each GPU type, node count and sharding")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def memory_chart(stack: str, memory: Mapping[str, Any], path: Path) -> Path:
    """The memory per GPU as one stacked bar of its parts (GB), the GPU's memory as a line and the forecast's
    band as a shaded span; `memory` is the forecast output's `memory_gb_per_gpu`."""
    plt = _pyplot()
    parts = [p for p in PARTS if isinstance(memory.get(p), int | float)]
    parts += [k for k, v in memory.items() if k not in (*PARTS, *_NOT_PARTS) and isinstance(v, int | float)]
    fig, ax = plt.subplots(figsize=(9, 2.8), dpi=110)
    left = 0.0
    for i, part in enumerate(parts):
        value = float(memory[part])
        ax.barh([0], [value], left=left, color=plt.get_cmap("tab10")(i % 10), label=f"{part} {value:,.1f} GB")
        left += value
    gpu = float(memory.get("gpu") or 0)
    if gpu:
        ax.axvline(gpu, color="red", linewidth=2, label=f"GPU memory {gpu:g} GB")
    low, high = memory.get("total_low"), memory.get("total_high")
    if isinstance(low, int | float) and isinstance(high, int | float):
        ax.axvspan(low, high, color="grey", alpha=0.25, label=f"band {low:,.1f}-{high:,.1f} GB")
    ax.set_yticks([])
    ax.set_xlabel("GB per GPU")
    ax.set_xlim(0, max(left, gpu, float(high or 0)) * 1.08)
    ax.set_title(f"{stack}: memory per GPU by part")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
