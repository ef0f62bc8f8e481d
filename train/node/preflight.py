"""trainstack preflight, run by torchrun on every rank: straggler GEMM, all-reduce sweep, burn-in.

    torchrun <rendezvous args> -m train.node.preflight --record R.json --gemm-floor-tflops 450 ...

Each node's local rank 0 writes its sections of the node's health record and prints the lines the start
script logs (`TRAINSTACK_GEMM`, `TRAINSTACK_ALLREDUCE`, `TRAINSTACK_BUSBW_GB_PER_S=`, `TRAINSTACK_BURNIN`).
Every verdict is gathered to every rank, so all ranks stop together (none waits in a collective for a
peer that gave up); a failure is printed as `TRAINSTACK_FAIL <one line>` and every rank exits 1.
torch is imported here only: it exists on the nodes, not in the project's venv.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from train.node import healthgate, healthrecord, nvml_watch, verdicts
from train.node.nvml import GpuReading

GEMM_N = 8192  # 8192^3 bf16: ~1.1 TFLOP a product, ~1.4 ms on a Hopper GPU: long past launch overhead
BURN_IN_BYTES = 1 << 28  # all-reduce size during burn-in: 256 MiB measures bandwidth, not latency


@dataclass
class Ctx:
    """Who this process is, and the node's NVML view (local rank 0 only)."""

    args: argparse.Namespace
    rank: int
    world: int
    local_rank: int
    node: int  # this node's rank in the job (torchrun's GROUP_RANK)
    cuda: bool
    device: Any
    watch_file: Path | None = None  # the NVML samples (local rank 0 only; see train/node/nvml_watch.py)
    fails: list[str] = field(default_factory=list)  # this node's failure lines (local rank 0)
    since: float = field(default_factory=time.monotonic)  # when the previous check ended (its elapsed_s)

    @property
    def lead(self) -> bool:
        return self.local_rank == 0

    def say(self, line: str) -> None:
        if self.lead:
            print(line, flush=True)

    def record(self, section: str, data: dict[str, Any]) -> None:
        """Write one check's section with how long it took (the checks run one after another)."""
        now = time.monotonic()
        elapsed, self.since = now - self.since, now
        if self.lead:
            healthrecord.update(self.args.record, section, data | {"elapsed_s": round(elapsed, 3)})


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m train.node.preflight", description=__doc__.splitlines()[0])
    p.add_argument("--record", type=Path, required=True)
    p.add_argument("--replace", choices=("pod", "cluster"), default="pod")
    p.add_argument("--gemm-seconds", type=float, default=3.0)
    p.add_argument("--gemm-floor-tflops", type=float, default=0.0)
    p.add_argument("--straggler-tolerance-pct", type=float, default=10.0)
    p.add_argument("--busbw-floor-gb-per-s", type=float, default=0.0)
    p.add_argument("--allreduce-max-bytes", type=int, default=0, help="0: 1 GiB on GPU, 4 MiB on CPU")
    p.add_argument("--burn-in-s", type=float, default=0.0)
    p.add_argument("--burn-in-clock-drop-pct", type=float, default=20.0)
    p.add_argument("--burn-in-busbw-drop-pct", type=float, default=50.0)
    return p.parse_args(argv)


def _settle(ctx: Ctx, phase: str) -> None:
    """Gather every node's failures; on any, print this node's line (or the first peer's) and exit 1."""
    gathered: list[Any] = [None] * ctx.world
    dist.all_gather_object(gathered, (ctx.node, ctx.fails))
    failed = [(node, lines[0]) for node, lines in gathered if lines]
    if not failed:
        return
    own = [line for node, line in failed if node == ctx.node]
    if own:
        ctx.say(f"TRAINSTACK_FAIL {own[0]}")
    else:
        node, line = failed[0]
        ctx.say(f"TRAINSTACK_FAIL {phase}: node {node} failed ({line}); this node stops with it")
    dist.destroy_process_group()
    sys.exit(1)


def _gemm_tflops(ctx: Ctx, seconds: float) -> float:
    n = GEMM_N
    # Random data: zeros let the tensor cores run faster than real work does.
    a = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=ctx.device, dtype=torch.bfloat16)
    for _ in range(3):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize(ctx.device)
    iters, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize(ctx.device)
        iters += 10
    return 2 * n**3 * iters / (time.perf_counter() - start) / 1e12


def straggler(ctx: Ctx) -> None:
    """Every GPU of every node multiplies at once; the node's local rank 0 judges its own GPUs."""
    if not ctx.cuda:
        ctx.record("straggler", {"status": "skipped", "reason": "no GPU: cpu test cluster"})
        return
    dist.barrier()
    began = time.time()
    mine = _gemm_tflops(ctx, ctx.args.gemm_seconds)
    # The node's GPUs read from the second half of the GEMMs: PCIe generation and throttling under load.
    loaded = _watched(ctx, began + ctx.args.gemm_seconds / 2, time.time())
    gathered: list[Any] = [None] * ctx.world
    dist.all_gather_object(gathered, (ctx.node, ctx.local_rank, mine))
    tflops = {local: value for node, local, value in gathered if node == ctx.node}
    found = verdicts.straggler_findings(tflops, ctx.args.gemm_floor_tflops, ctx.args.straggler_tolerance_pct)
    lines = [f"GPU {g}: {why}; {healthgate.ACTIONS[ctx.args.replace]}" for g, why in found]
    section: dict[str, Any] = {
        "tflops": {str(k): round(v, 1) for k, v in sorted(tflops.items())},
        "median_tflops": round(statistics.median(tflops.values()), 1),
        "floor_tflops": ctx.args.gemm_floor_tflops,
        "tolerance_pct": ctx.args.straggler_tolerance_pct,
        "gemm": f"bf16 {GEMM_N}x{GEMM_N}x{GEMM_N}, {ctx.args.gemm_seconds:g} s on every GPU at once",
    }
    if ctx.lead and loaded:
        under_load, load_lines = healthgate.run_gate(
            _Fixed(loaded[-1][1]), len(tflops), ctx.args.replace, under_load=True
        )
        section["under_load"] = under_load
        lines += load_lines
    for gpu, value in sorted(tflops.items()):
        ctx.say(f"TRAINSTACK_GEMM gpu={gpu} tflops={value:.1f}")
    section |= {"status": "fail" if lines else "pass", "reason": lines[0] if lines else None}
    ctx.record("straggler", section)
    if ctx.lead:
        ctx.fails += lines
    _settle(ctx, "straggler test")


@dataclass
class _Fixed:
    """A sampler that answers with readings already taken (the under-load read of the straggler test)."""

    readings: list[GpuReading]

    def read(self) -> list[GpuReading]:
        return self.readings

    def close(self) -> None:
        return None


def _watched(ctx: Ctx, start: float, end: float) -> list[tuple[float, list[GpuReading]]]:
    return nvml_watch.samples(ctx.watch_file, start, end) if ctx.watch_file is not None else []


def _timed_allreduce(ctx: Ctx, data: Any, iters: int) -> float:
    """Seconds per all-reduce on the slowest rank (which sets everyone's pace)."""
    if ctx.cuda:
        torch.cuda.synchronize(ctx.device)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data)
    if ctx.cuda:
        torch.cuda.synchronize(ctx.device)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], device=ctx.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def allreduce_sweep(ctx: Ctx) -> None:
    """nccl-tests-style sweep; the largest size's bus bandwidth is held against the floor."""
    max_bytes = ctx.args.allreduce_max_bytes or (1 << 30 if ctx.cuda else 1 << 22)
    sizes = [1 << 20]
    while sizes[-1] * 4 <= max_bytes:
        sizes.append(sizes[-1] * 4)
    rows, busbw = [], 0.0
    for size in sizes:
        data = torch.ones(size // 4, device=ctx.device)
        for _ in range(3):
            dist.all_reduce(data)
        elapsed = _timed_allreduce(ctx, data, 20 if size <= 1 << 26 else 5)
        algbw = size / elapsed / 1e9
        busbw = algbw * 2 * (ctx.world - 1) / ctx.world  # nccl-tests' definition (0 for one rank)
        rows.append({"bytes": size, "time_us": round(elapsed * 1e6, 1), "algbw_gb_per_s": round(algbw, 2)})
        rows[-1]["busbw_gb_per_s"] = round(busbw, 2)
        ctx.say(
            f"TRAINSTACK_ALLREDUCE ranks={ctx.world} bytes={size} time_us={elapsed * 1e6:.1f} "
            f"algbw={algbw:.2f}GB/s busbw={busbw:.2f}GB/s"
        )
        del data
    ctx.say(f"TRAINSTACK_BUSBW_GB_PER_S={busbw:.2f}")
    floor = ctx.args.busbw_floor_gb_per_s
    why = verdicts.busbw_floor_finding(busbw, ctx.world, floor)
    lines = [f"node: {why}, {healthgate.ACTIONS[ctx.args.replace]}"] if why else []
    status = "fail" if lines else "pass"
    section = {"status": status, "ranks": ctx.world, "sizes": rows, "busbw_gb_per_s": round(busbw, 2)}
    ctx.record("allreduce", section | {"floor_gb_per_s": floor, "reason": lines[0] if lines else None})
    ctx.fails += lines if ctx.lead else []
    _settle(ctx, "all-reduce")


def burn_in(ctx: Ctx) -> None:
    """GEMM and all-reduce together on every rank for --burn-in-s seconds, sampled; then judged."""
    seconds = ctx.args.burn_in_s
    if seconds <= 0 or not ctx.cuda:
        why = "training.burn_in_min is 0" if seconds <= 0 else "no GPU: cpu test cluster"
        ctx.record("burn_in", {"status": "skipped", "reason": why})
        return
    n = GEMM_N
    a = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    busy = torch.ones(BURN_IN_BYTES // 4, device=ctx.device)
    timed = torch.ones(BURN_IN_BYTES // 4, device=ctx.device)
    busbw: list[float] = []
    times: list[float] = []
    began, start = time.time(), time.monotonic()
    gemms = 0
    while True:
        work = dist.all_reduce(busy, async_op=True)  # runs on NCCL's stream beside the products below
        for _ in range(20):
            torch.mm(a, b)
        gemms += 20
        work.wait()
        elapsed = _timed_allreduce(ctx, timed, 4)  # 4 x 256 MiB: a few ms, less launch jitter than 2
        now = time.monotonic() - start
        busbw.append(BURN_IN_BYTES / elapsed / 1e9 * 2 * (ctx.world - 1) / ctx.world)
        times.append(now)
        done = torch.tensor([1.0 if now >= seconds else 0.0], device=ctx.device)
        dist.all_reduce(done, op=dist.ReduceOp.MAX)  # every rank leaves at the same iteration
        if done.item() > 0:
            break
    torch.cuda.synchronize(ctx.device)
    samples: dict[int, list[verdicts.GpuSample]] = {}
    slowdown: dict[int, int] = {}
    for t, readings in _watched(ctx, began, time.time()):
        for r in readings:
            sample = verdicts.GpuSample(t - began, r.temperature_c, r.sm_clock_mhz, r.throttle_mask)
            samples.setdefault(r.index, []).append(sample)
            if r.slowdown_temp_c:
                slowdown[r.index] = r.slowdown_temp_c
    _judge_burn_in(ctx, samples, busbw, times, slowdown, gemms)


def _judge_burn_in(
    ctx: Ctx,
    samples: dict[int, list[verdicts.GpuSample]],
    busbw: list[float],
    times: list[float],
    slowdown: dict[int, int],
    gemms: int,
) -> None:
    args = ctx.args
    limits = verdicts.BurnInLimits(args.burn_in_clock_drop_pct, args.burn_in_busbw_drop_pct, slowdown)
    summaries = {g: verdicts.gpu_summary(s, args.burn_in_clock_drop_pct) for g, s in samples.items()}
    # One rank moves no data: its bus bandwidth is 0 by definition, so that rule waits for two ranks.
    judged_bw = busbw if ctx.world >= 2 else []
    found = verdicts.burn_in_findings(summaries, judged_bw, limits, healthgate.FALLBACK_SLOWDOWN_C)
    action = healthgate.ACTIONS[args.replace]
    lines = [f"{'node' if g is None else f'GPU {g}'}: {why}; {action}" for g, why in found]
    section = {
        "status": "fail" if lines else "pass",
        "reason": lines[0] if lines else None,
        "minutes": round(args.burn_in_s / 60, 2),
        "ran_s": round(times[-1], 1) if times else 0,
        "gemms_per_gpu": gemms,
        "gpus": {str(g): s for g, s in sorted(summaries.items())},
        "busbw_gb_per_s": verdicts.busbw_summary(busbw, times),
        "thresholds": {
            "clock_drop_pct": args.burn_in_clock_drop_pct,
            "busbw_drop_pct": args.burn_in_busbw_drop_pct,
        },
    }
    ctx.record("burn_in", section)
    bw = section["busbw_gb_per_s"]
    assert isinstance(bw, dict)
    temps = [t for s in summaries.values() if isinstance(t := s.get("temperature_max_c"), int)]
    ctx.say(
        f"TRAINSTACK_BURNIN ran_s={section['ran_s']} temp_max_c={max(temps) if temps else 'n/a'} "
        f"busbw_min={bw.get('min', 0):.1f}GB/s median={bw.get('median', 0):.1f}GB/s "
        f"max={bw.get('max', 0):.1f}GB/s "
        f"status={section['status']}"
    )
    ctx.fails += lines if ctx.lead else []
    _settle(ctx, "burn-in")


def _init_group(backend: str) -> None:
    """The preflight's process group: torchrun's own (env://), or, run by train/node/launch.py before training
    in the same torchrun launch, a prefixed view of torchrun's store, so that training's group, made after
    this one under the store's usual keys, finds none of this one's keys there."""
    prefix = os.environ.get("TRAINSTACK_PREFLIGHT_STORE_PREFIX")
    if not prefix:
        dist.init_process_group(backend)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # torchrun's agent serves the store at MASTER_ADDR:MASTER_PORT (c10d rendezvous, the default); where it
    # does not (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1), rank 0 serves it, as env:// would.
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=rank == 0 and not agent,
        timeout=timedelta(minutes=10),
        wait_for_workers=False,
    )
    dist.init_process_group(backend, store=dist.PrefixStore(prefix, store), rank=rank, world_size=world)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    cuda = os.environ.get("TRAINSTACK_DEVICE", "cuda") == "cuda"
    _init_group("nccl" if cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    node = int(os.environ.get("GROUP_RANK", "0"))
    ctx = Ctx(args, dist.get_rank(), dist.get_world_size(), local_rank, node, cuda, device)
    watcher = None
    if cuda and ctx.lead:
        ctx.watch_file = Path(tempfile.mkstemp(prefix="trainstack-watch-", suffix=".jsonl")[1])
        watcher = subprocess.Popen(
            [sys.executable, "-m", "train.node.nvml_watch", "--out", str(ctx.watch_file), "--interval-s", "1"]
        )
    try:
        straggler(ctx)
        allreduce_sweep(ctx)
        burn_in(ctx)
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(timeout=10)
        if ctx.watch_file is not None:
            ctx.watch_file.unlink(missing_ok=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
