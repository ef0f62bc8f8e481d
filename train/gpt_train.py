"""GPT training job for torchrun: bf16, DDP or FSDP full shard, token shards from disk, MFU, resumable.

    torchrun --nproc-per-node 8 train/gpt_train.py --model gpt-350m --micro-batch 16 --sharding ddp

Environment (set by the start script; defaults let it run by hand):
  TRAINSTACK_DATA_DIR           token shards in the layout of train/shards.py (default ./data/tokens)
  TRAINSTACK_CHECKPOINT_DIR     step-<n>.pt checkpoints (default ./checkpoints); only global rank 0 reads
                                and writes them, the other ranks get the state broadcast from it
  TRAINSTACK_STOP_FILE          when it appears, checkpoint and stop (the max-run watchdog)
  TRAINSTACK_DEVICE             cuda (nccl) or cpu (gloo); default: cuda when available
  TRAINSTACK_SHARD_INDEX/_NUM_SHARDS  which of the shards this node reads
  TRAINSTACK_PROGRESS_FILE      each node's local rank 0 appends a line per logged step
  TRAINSTACK_BUSY_FILE          present while the ranks save a checkpoint (the node's watchdog: not a hang)
  TRAINSTACK_PG_TIMEOUT_S       the process group's timeout (train/node/launch.py sets it from the run's pace)
                                (the contract in train/node/progress.py)
  TRAINSTACK_PEAK_TFLOPS        the GPU's dense bf16 peak for MFU, where the device name is not in PEAK_TFLOPS

Every figure is printed by global rank 0; the last line, `TRAINSTACK_SUMMARY {json}`, holds the run's
median step time, tokens per second, MFU and peak GPU memory (steps after --warmup-steps only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

if not __package__:  # run as a file by torchrun: make `train` importable from the work directory
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from train.gpt import GPT, next_token_loss
from train.gpt_config import PRESETS, GPTConfig
from train.node.progress import progress_line
from train.shards import load
from train.train import AsyncSaver, busy, newest_checkpoint, pg_timeout

# Dense (no sparsity) bf16 tensor-core peak per GPU, TFLOP/s, by device-name substring: NVIDIA's H100 and
# H200 datasheets list 1,979 TFLOPS "with sparsity" for the SXM parts, half of it dense (the same figure as
# components/gpus.py, which the node cannot import). The PCIe H100 is slower: set TRAINSTACK_PEAK_TFLOPS.
PEAK_TFLOPS = {"H100 80GB HBM3": 989.4, "H200": 989.4}
_CKPT_STEP = re.compile(r"^step-(\d+)\.pt$")
_term_requested = False


@dataclass(frozen=True)
class Run:
    """Where this process sits in the job and what it was asked to do."""

    rank: int
    local_rank: int
    world: int
    device: torch.device
    cfg: GPTConfig
    args: argparse.Namespace


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", choices=sorted(PRESETS), default="gpt-124m")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per GPU per step")
    p.add_argument("--steps", type=int, default=200, help="total optimizer steps of the job")
    p.add_argument("--sharding", choices=("ddp", "fsdp"), default="ddp", help="fsdp = full shard (ZeRO-3)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup-steps", type=int, default=3, help="left out of the timing summary")
    p.add_argument("--checkpoint-every", type=int, default=50, help="0: never (throughput runs)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.checkpoint_every < 0:
        p.error("--checkpoint-every must be 0 (never) or more")
    for name in ("micro_batch", "steps", "log_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def peak_flops(device: torch.device) -> float | None:
    """The GPU's dense bf16 peak in FLOP/s; None on CPU or an unknown GPU without TRAINSTACK_PEAK_TFLOPS."""
    if override := os.environ.get("TRAINSTACK_PEAK_TFLOPS"):
        return float(override) * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tf * 1e12 for key, tf in PEAK_TFLOPS.items() if key in name), None)


def build(run: Run) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model on its device, wrapped for DDP or sharded with FSDP (bf16 compute, fp32 master weights)."""
    torch.manual_seed(run.args.seed)  # the same initial weights on every rank
    model = GPT(run.cfg).to(run.device)
    if run.args.sharding == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mp_policy=policy)
        wrapped = fully_shard(model, mp_policy=policy)
    else:
        ids = [run.local_rank] if run.device.type == "cuda" else None
        wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    return wrapped, torch.optim.AdamW(groups, lr=run.args.lr, betas=(0.9, 0.95))


def _state_options(**kw: bool) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def save(run: Run, model: torch.nn.Module, optim: Any, step: int, saver: AsyncSaver) -> None:
    """Gather the full (unsharded) state onto rank 0's CPU (a copy) and write it there in the background
    (train.train.AsyncSaver); every rank must call this."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optim, options=_state_options(cpu_offload=True))
    if run.rank == 0:
        saver.save(step, {"model": msd, "optim": osd, "step": step, "config": asdict(run.cfg)})


def resume(run: Run, model: torch.nn.Module, optim: torch.optim.Optimizer, ckpt_dir: Path) -> int:
    """Load the newest checkpoint any rank's node holds and broadcast it; returns the step to start from.

    Global rank 0 writes checkpoints, but torchrun's c10d rendezvous does not keep it on the same node from
    one start to the next (seen on two H200 nodes: docs/GPU-VALIDATION.md), so every rank looks in its own
    node's directory and the rank holding the newest one (the lowest such rank on a tie) shares it."""
    from torch.distributed.checkpoint.state_dict import set_state_dict

    newest = newest_checkpoint(ckpt_dir)
    mine = int(_CKPT_STEP.match(newest.name).group(1)) if newest else -1  # type: ignore[union-attr]
    steps = torch.zeros(run.world, dtype=torch.long, device=run.device)
    steps[run.rank] = mine
    dist.all_reduce(steps)  # each rank filled its own slot
    best = int(steps.max().item())
    if best < 0:
        _say(run, "first step 0 (fresh start)")
        return 0
    src = int((steps == best).nonzero()[0].item())
    state = torch.load(newest, map_location="cpu", weights_only=False) if run.rank == src else None
    if state is not None and state.get("config") != asdict(run.cfg):
        raise SystemExit(f"{newest} holds model {state.get('config')}, not {asdict(run.cfg)}; move it away")
    box = [state]
    dist.broadcast_object_list(box, src=src, device=run.device)  # every rank gets the full state
    state = box[0]
    assert state is not None  # rank `src` loaded it
    # Each rank keeps its own part of the full state (all of it under DDP, its shard under FSDP).
    full = {"model_state_dict": state["model"], "optim_state_dict": state["optim"]}
    set_state_dict(model, optim, options=_state_options(), **full)
    _say(run, f"first step {best} (resumed from step-{best:08d}.pt of global rank {src})")
    return best


def _say(run: Run, text: str) -> None:
    if run.rank == 0:
        print(text, flush=True)


def _on_term(signum: int, frame: FrameType | None) -> None:
    global _term_requested
    _term_requested = True


def _should_stop(stop_file: str, device: torch.device) -> bool:
    """Every rank stops at the same step or the collectives hang: agree on the flag with an all_reduce."""
    local = _term_requested or bool(stop_file and os.path.exists(stop_file))
    flag = torch.tensor([1.0 if local else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def _lr(args: argparse.Namespace, step: int) -> float:
    """Linear warm-up over 20 steps, then constant: a function of the step alone, so a resume matches."""
    return float(args.lr) * min(1.0, (step + 1) / 20)


def _setup() -> Run:
    args = parse_args()
    use_cuda = os.environ.get("TRAINSTACK_DEVICE", "cuda" if torch.cuda.is_available() else "cpu") == "cuda"
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=pg_timeout())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    world = dist.get_world_size()
    return Run(dist.get_rank(), local_rank, world, device, PRESETS[args.model], args)


def main() -> None:
    run = _setup()
    args, cfg = run.args, run.cfg
    shards = load(
        Path(os.environ.get("TRAINSTACK_DATA_DIR", "data/tokens")),
        int(os.environ.get("TRAINSTACK_SHARD_INDEX", "0")),
        int(os.environ.get("TRAINSTACK_NUM_SHARDS", "1")),
        cfg.seq_len + 1,
    )
    if shards.vocab_size > cfg.vocab_size:
        raise SystemExit(f"shards use {shards.vocab_size} token ids, model {args.model} has {cfg.vocab_size}")
    ckpt_dir = Path(os.environ.get("TRAINSTACK_CHECKPOINT_DIR", "checkpoints"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_term)
    model, optim = build(run)
    first = resume(run, model, optim, ckpt_dir)
    size = f"{cfg.num_params() / 1e6:.1f}M parameters"
    _say(run, f"model {args.model}: {size}, {args.sharding}, world {run.world}")
    step, times, losses = train_loop(run, model, optim, shards, first, ckpt_dir)
    summarize(run, first, step, times, losses)
    dist.barrier(device_ids=[run.local_rank] if run.device.type == "cuda" else None)
    dist.destroy_process_group()


def train_loop(
    run: Run, model: torch.nn.Module, optim: torch.optim.Optimizer, shards: Any, first: int, ckpt_dir: Path
) -> tuple[int, list[float], list[float]]:
    """Steps from `first` to --steps or a stop request; returns the last step and per-step times/losses."""
    args, cfg = run.args, run.cfg
    stop_file = os.environ.get("TRAINSTACK_STOP_FILE", "")
    progress = os.environ.get("TRAINSTACK_PROGRESS_FILE", "") if run.local_rank == 0 else ""
    autocast = torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=args.sharding == "ddp")
    tokens_per_step = args.micro_batch * cfg.seq_len * run.world
    step, times, losses = first, [], []
    saving = 0.0  # seconds the loop waited on checkpoint saves (the progress contract's checkpoint_s)
    saver = AsyncSaver(ckpt_dir)
    tick = time.perf_counter()
    while step < args.steps:
        batch = shards.windows(args.seed, step, run.rank, args.micro_batch, cfg.seq_len + 1)
        tokens = torch.from_numpy(batch).to(run.device, non_blocking=True)
        for group in optim.param_groups:
            group["lr"] = _lr(args, step)
        with autocast:
            loss = next_token_loss(model, tokens)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        step += 1
        stop = _should_stop(stop_file, run.device)  # its .item() waits for the GPU: the step is done
        now = time.perf_counter()
        times.append(now - tick)
        losses.append(float(loss.item()))
        if args.checkpoint_every and (step % args.checkpoint_every == 0 or step == args.steps or stop):
            began = time.perf_counter()
            with busy(os.environ.get("TRAINSTACK_BUSY_FILE", "") if run.local_rank == 0 else "", "saving"):
                save(run, model, optim, step, saver)
            saving += time.perf_counter() - began
        if step % args.log_every == 0 or stop:
            per_step = statistics.fmean(times[-args.log_every :])
            _say(run, f"step {step} loss {losses[-1]:.4f} {per_step * 1e3:.1f} ms/step "
                 f"{tokens_per_step / per_step:,.0f} tokens/s")  # fmt: skip
            if progress:
                samples = run.world * args.micro_batch
                _append(progress, step, per_step, samples, tokens_per_step, losses[-1], saving)
        if stop:
            _say(run, f"stopping at step {step} (checkpoint saved)")
            break
        tick = time.perf_counter()  # the checkpoint's time is not a step's
    saver.wait()  # the last checkpoint is whole before the start script's final sync
    return step, times, losses


def _append(
    path: str, step: int, per_step: float, samples: int, tokens: int, loss: float, saving: float = 0.0
) -> None:
    """One line of the progress contract, written whole with one append."""
    rates = {"samples_per_s": samples / per_step, "tokens_per_s": tokens / per_step}
    line = progress_line(step, per_step, loss, now=time.time(), checkpoint_s=round(saving, 3), **rates)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def summarize(run: Run, first: int, step: int, times: list[float], losses: list[float]) -> None:
    """Median step time over the steps after warm-up, tokens/s, MFU and peak memory: one JSON line."""
    args, cfg = run.args, run.cfg
    timed = times[args.warmup_steps :] or times
    peak_mem = torch.cuda.max_memory_allocated(run.device) if run.device.type == "cuda" else 0
    mem = torch.tensor([float(peak_mem)], device=run.device)
    dist.all_reduce(mem, op=dist.ReduceOp.MAX)
    if not timed or run.rank != 0:
        return
    median = statistics.median(timed)
    tokens_per_s = args.micro_batch * cfg.seq_len * run.world / median
    peak = peak_flops(run.device)
    mfu = cfg.flops_per_token() * tokens_per_s / (run.world * peak) if peak else None
    summary = {
        "model": args.model, "params": cfg.num_params(), "sharding": args.sharding, "world": run.world,
        "micro_batch": args.micro_batch, "seq_len": cfg.seq_len, "first_step": first, "last_step": step,
        "timed_steps": len(timed), "median_step_s": median, "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s / run.world, "flops_per_token": cfg.flops_per_token(),
        "peak_tflops": peak / 1e12 if peak else None, "mfu": mfu, "peak_mem_gib": mem.item() / 2**30,
        "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
        "device": torch.cuda.get_device_name(run.device) if run.device.type == "cuda" else "cpu",
    }  # fmt: skip
    print("TRAINSTACK_SUMMARY " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
