"""The terminal table `scripts/forecast` prints: memory per GPU, compute and time, money, and fixes."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from common.terminal import for_rich
from forecast.compare import Comparison
from forecast.compute import step
from forecast.model import Forecast
from forecast.shapes import ffn_width, kv_heads
from forecast.step import kernels
from stackconfig.config import StackConfig


def _money(amount: float) -> str:
    return f"${amount:,.2f}"


def _memory(result: Forecast) -> Table:
    m = result.memory
    table = Table(title="Memory per GPU", title_justify="left", show_header=True)
    table.add_column("part")
    table.add_column("GB", justify="right")
    for label, value in (
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer state", m.optimizer),
        ("activations", m.activations),
        ("zero3 gather buffers", m.gather_buffers),
        ("allowance (context, NCCL, fragmentation)", m.allowance),
    ):
        table.add_row(label, f"{value:.1f}")
    table.add_row("total", f"{m.total:.1f}", style="bold")
    table.add_row("band (measured errors, docs/FORECAST.md)", f"{m.total_low:.1f}-{m.total_high:.1f}")
    verdict = {"fits": "fits", "may not fit": "MAY NOT FIT", "does not fit": "DOES NOT FIT"}[m.verdict]
    table.add_row(f"GPU memory ({verdict})", f"{m.gpu_memory:g}")
    table.add_row(
        "headroom at the band's upper end", f"{m.gpu_memory - m.total_high:.1f}", style=_STYLE[m.verdict]
    )
    return table


_STYLE = {"fits": "green", "may not fit": "bold yellow", "does not fit": "bold red"}
COMPARE_WIDTH = 104
_SHORT = {"fits": "fits", "may not fit": "may not", "does not fit": "no"}


def _compute(result: Forecast) -> Table:
    c, d = result.compute, result.input.deployment
    table = Table(title="Compute and time (one job)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("training FLOPs (model)", f"{c.model_flops:.3g}")
    table.add_row("executed FLOPs (with recompute)", f"{c.executed_flops:.3g}")
    table.add_row("MFU assumed", f"{c.mfu:.2f}")
    table.add_row("effective TFLOPS per GPU", f"{c.effective_tflops_per_gpu:,.0f}")
    table.add_row("tokens per GPU-second", f"{c.tokens_per_gpu_second:,.0f}")
    table.add_row("GPU-hours", f"{c.gpu_hours:,.1f}")
    table.add_row(f"hours on {d.gpus_per_job} GPUs, ideal", f"{c.ideal_hours:,.2f}")
    overhead = result.input.workload.overhead
    table.add_row(f"hours with {overhead:.0%} overhead", f"{c.hours:,.2f}", style="bold")
    table.add_row(f"restarts (max_run_hours {d.max_run_hours:g})", str(c.restarts))
    return table


def _explain(result: Forecast) -> Table:
    """The step's parts (forecast/step.py) and which moment sets the memory peak."""
    w, d, m = result.input.workload, result.input.deployment, result.memory
    parts = step(w, d.gpu, d.gpus_per_job)
    tokens = w.sequence_length * w.micro_batch_per_gpu
    table = Table(title="Why: one micro-batch step on one GPU", title_justify="left")
    table.add_column("part")
    table.add_column("ms", justify="right")
    table.add_column("share", justify="right")
    for label, value in (
        ("matmul (per GEMM shape, roofline)", parts.matmul),
        ("attention", parts.attention),
        ("elementwise (HBM bytes)", parts.elementwise),
        ("optimizer step (HBM bytes)", parts.optimizer),
        ("LoRA adapters (HBM bytes)", parts.adapters),
        (f"host beyond the GPU ({kernels(w):,.0f} kernels launched)", parts.latency),
        ("communication (zero3)", parts.communication),
    ):
        table.add_row(label, f"{value * 1e3:,.1f}", f"{value / parts.total:.0%}")
    table.add_row("step", f"{parts.total * 1e3:,.1f}", f"{tokens:,} tokens", style="bold")
    table.add_row("  of which checkpointing's recompute", f"{parts.recompute * 1e3:,.1f}", "")
    peak = "end of backward (gradients)" if m.gradients > m.activations else "end of forward (activations)"
    table.add_row("memory peak", peak, "GB")
    for label, gb in (
        ("  weights", m.weights),
        ("  optimizer state", m.optimizer),
        ("  gather buffers (zero3)", m.gather_buffers),
        ("  gradients" + (" (the peak's)" if m.gradients > m.activations else ""), m.gradients),
        ("  activations" + ("" if m.gradients > m.activations else " (the peak's)"), m.activations),
        ("  allowance (CUDA context, buffers)", m.allowance),
    ):
        table.add_row(label, "", f"{gb:,.1f}")
    table.add_row("shapes", f"kv_heads {kv_heads(w)}, ffn_hidden_size {ffn_width(w)}", "")
    if w.mfu is not None:
        table.caption = "the stack sets mfu: its time replaces this model's"
    return table


def _money_table(result: Forecast) -> Table:
    k, d = result.cost, result.input.deployment
    table = Table(title="Money (the whole stack)", title_justify="left")
    table.add_column("")
    table.add_column("per hour", justify="right")
    table.add_column("run", justify="right")
    table.add_row("on-demand (compute + storage)", _money(k.usd_per_hour), _money(k.run_usd), style="bold")
    if k.spot_usd_per_hour is not None and k.spot_run_usd is not None:
        table.add_row("at the spot bid", _money(k.spot_usd_per_hour), _money(k.spot_run_usd))
    table.caption = f"{d.jobs} job(s) x {d.gpus_per_job} GPUs; storage {_money(d.storage_usd_per_hour)}/h"
    return table


def render(
    stack: str,
    config: StackConfig,
    result: Forecast,
    sets: Sequence[str] = (),
    console: Console | None = None,
    explain: bool = False,
) -> None:
    out = console or Console()
    w, c = result.input.workload, config.cluster
    changed = f" with {for_rich(', '.join(sets))}" if sets else ""
    out.print(
        f"[bold]{for_rich(stack)}[/bold]{changed}: {w.parameters:.3g} parameters, {w.tokens:.3g} tokens, "
        f"{w.method}, {w.precision}, {w.optimizer}, {w.sharding}, on {c.nodes} x {c.gpus_per_node} "
        f"{c.gpu_type} ({c.topology})"
    )
    for note in result.assumed:
        out.print(f"assumed: {for_rich(note)}")
    tables = (_memory(result), _compute(result), _money_table(result))
    for table in (*tables, _explain(result)) if explain else tables:
        out.print(table)
    if result.fixes:
        m = result.memory
        head = (
            f"[bold yellow]May not fit[/bold yellow]: {m.total_low:.1f}-{m.total_high:.1f} GB of "
            f"{m.gpu_memory:g}."
            if m.verdict == "may not fit"
            else "[bold red]Does not fit.[/bold red]"
        )
        out.print(f"{head} Changes that make it fit, cheapest first:")
        for fix in result.fixes:
            out.print(f"  - {for_rich(fix)}")


def render_compare(stack: str, comparison: Comparison, console: Console | None = None) -> None:
    """Every candidate, cheapest run first: memory verdict, hours, $/h and run cost; the cheapest feasible
    one marked, and what it saves against the stack as configured."""
    out = console or Console()
    out.width = max(out.width, COMPARE_WIDTH)  # eight columns; a pipe's default 80 would cut every cell
    table = Table(
        title=f"{stack}: each GPU type, node count and sharding RunPod rents, cheapest run first",
        title_justify="left",
    )
    for name, justify in (
        ("GPUs", "left"),
        ("sharding", "left"),
        ("GB/GPU (top)", "right"),
        ("verdict", "left"),
        ("hours", "right"),
        ("$/h", "right"),
        ("run cost", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    best = comparison.cheapest
    for o in comparison.options:
        marks = [m for m, on in (("<- cheapest", o is best), ("configured", o.configured)) if on]
        style = "bold green" if o is best else "bold" if o.configured else None if o.feasible else "dim"
        table.add_row(
            f"{o.nodes}x{o.gpus_per_node} {o.gpu}",
            o.sharding,
            f"{o.total_gb:.0f} ({o.total_high_gb:.0f})/{o.gpu_gb:g}",
            _SHORT[o.verdict],
            f"{o.hours:,.2f}",
            f"{o.usd_per_hour:,.0f}",
            _money(o.run_usd),
            ", ".join(marks),
            style=style,
        )
    out.print(table)
    conf = comparison.configured
    if best is None:
        out.print(f"[bold red]Nothing fits[/bold red] among {len(comparison.options)} candidates.")
        return
    saving = comparison.saving_usd or 0.0
    if best.configured:
        out.print(f"cheapest feasible: {best.label} {_money(best.run_usd)}: the stack as configured")
    else:
        out.print(
            f"cheapest feasible: {best.label} {_money(best.run_usd)} (-{_money(saving)} against "
            f"{conf.label} {_money(conf.run_usd)}, as configured)"
        )
