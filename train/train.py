"""A tiny data-parallel job the start scripts launch with torchrun: resumes, checkpoints atomically, stops.

Environment (set by the start script; defaults let it run by hand under torchrun):
  TRAINSTACK_CHECKPOINT_DIR     where step-<n>.pt checkpoints live (default ./checkpoints)
  TRAINSTACK_STOP_FILE          when this file appears, checkpoint and stop (the max-run watchdog)
  TRAINSTACK_DEVICE             cuda (nccl) or cpu (gloo); default: cuda when available
  TRAINSTACK_SHARD_INDEX/_NUM_SHARDS  which slice of the (synthetic) data this node reads
  TRAINSTACK_STEPS              total steps (default 300)
  TRAINSTACK_TRIAL_STEPS        a pool's search whose trials differ in length: total steps per trial,
                                comma-separated, the pod's TRAINSTACK_POD_INDEX picks its own (a trial past
                                the list's end takes TRAINSTACK_STEPS)
  TRAINSTACK_CHECKPOINT_EVERY   steps between checkpoints (default 50)
  TRAINSTACK_STEP_SLEEP_S       pause after each step (default 0): paces CPU test runs so they last
  TRAINSTACK_PROGRESS_FILE      where each node's local rank 0 appends a progress line per logged step
                                (the contract in train/node/progress.py; the metrics agent tails it)
  TRAINSTACK_BUSY_FILE          present while rank 0 saves a checkpoint (the node's watchdog: not a hang)
  TRAINSTACK_PG_TIMEOUT_S       the process group's timeout (train/node/launch.py sets it from the run's pace)

torch is imported here only: it exists on the nodes, not in the project's venv.

Data parallel by hand (rank 0's weights broadcast once, the gradients averaged with one all_reduce a step,
plain SGD), not DistributedDataParallel and torch.optim: both import torch._dynamo as they are built,
2.2-2.7 CPU-s a trainer on a 2-core machine, more than this job's whole run after `import torch`
(docs/PERFORMANCE.md). It compiles nothing, and SGD without momentum has no state to lose. A real job brings
its own (train/gpt_train.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

_CKPT_RE = re.compile(r"^step-(\d+)\.pt$")
KEEP_LOCAL = 3  # older checkpoints are already in the bucket (the start script syncs them)
LOG_EVERY = int(os.environ.get("TRAINSTACK_LOG_EVERY", "50"))  # steps between progress lines
BATCH = 64  # samples per rank per step (see _batch)
LR = 0.01  # plain SGD, no momentum (sgd_step)
_term_requested = False


def trial_steps(per_trial: str, index: int, default: int) -> int:
    """This trial's total steps: its entry of TRAINSTACK_TRIAL_STEPS, else TRAINSTACK_STEPS."""
    entries = [e.strip() for e in per_trial.split(",") if e.strip()]
    return int(entries[index]) if 0 <= index < len(entries) else default


def newest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint with the highest step number (names, not mtimes: copies reset mtimes)."""
    found = [(int(m.group(1)), p) for p in directory.glob("step-*.pt") if (m := _CKPT_RE.match(p.name))]
    return max(found)[1] if found else None


def save_checkpoint(directory: Path, step: int, state: dict[str, Any]) -> Path:
    """Write atomically (temp file, then rename) so a reader or an uploader never sees half a file."""
    final = directory / f"step-{step:08d}.pt"
    tmp = directory / f".{final.name}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, final)
    for old in sorted(directory.glob("step-*.pt"))[:-KEEP_LOCAL]:
        old.unlink(missing_ok=True)
    return final


class AsyncSaver:
    """Checkpoints written from a background thread, one at a time (issue #66): the loop waits only for a
    copy of the weights, and for the previous write when that one is still running, so a save stalls training
    for about a step, not for the disk. save_checkpoint's rename keeps every file whole for its readers."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def save(self, step: int, state: dict[str, Any]) -> None:
        """Start writing `state` (already a copy the loop will not change) as step `step`."""
        self.wait()
        self._thread = threading.Thread(target=self._write, args=(step, state), name="checkpoint-writer")
        self._thread.start()

    def _write(self, step: int, state: dict[str, Any]) -> None:
        try:
            save_checkpoint(self.directory, step, state)
        except BaseException as exc:  # raised in the loop at its next wait: a lost checkpoint is never silent
            self._error = exc

    def wait(self) -> None:
        """Until the write in flight is done; its error, if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def snapshot(model: torch.nn.Module) -> dict[str, Any]:
    """A copy of the weights the writer may take its time over while the loop changes the originals."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def write_progress(
    path: str, step: int, step_time_s: float, samples_per_s: float, loss: float, checkpoint_s: float = 0.0
) -> None:
    """One line of the progress contract (train/node/progress.py), written whole with one append."""
    line = {"v": 1, "time": time.time(), "step": step, "step_time_s": step_time_s}
    line |= {"samples_per_s": samples_per_s, "loss": loss, "checkpoint_s": round(checkpoint_s, 3)}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, separators=(",", ":")) + "\n")


@contextmanager
def busy(path: str, what: str) -> Iterator[None]:
    """The busy marker of the progress contract while `what` (saving, evaluating) runs: the node's watchdog
    then holds the silence to its busy bound, not the step's (train/node/hang.py)."""
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"v": 1, "what": what, "since": time.time()}))
        os.replace(tmp, path)
    try:
        yield
    finally:
        if path:
            with suppress(FileNotFoundError):
                os.unlink(path)


def pg_timeout() -> timedelta | None:
    """The process group's timeout from TRAINSTACK_PG_TIMEOUT_S (None: PyTorch's default)."""
    value = os.environ.get("TRAINSTACK_PG_TIMEOUT_S", "")
    return timedelta(seconds=float(value)) if value else None


def agreed_checkpoint(directory: Path, rank: int, world: int, device: torch.device) -> tuple[int, int]:
    """(step, rank holding it) of the newest checkpoint any rank's node holds; (-1, 0) when none does. A
    restart of the worker group in place (torchrun --max-restarts) finds the newest checkpoint on one node
    only (global rank 0's): every rank must start from the same step and weights, or the collectives would
    not match."""
    newest = newest_checkpoint(directory)
    steps = torch.full((world,), -1, dtype=torch.long, device=device)
    steps[rank] = int(_CKPT_RE.match(newest.name).group(1)) if newest else -1  # type: ignore[union-attr]
    dist.all_reduce(steps, op=dist.ReduceOp.MAX)
    best = int(steps.max().item())
    return best, int((steps == best).nonzero()[0].item()) if best >= 0 else 0


def _on_term(signum: int, frame: FrameType | None) -> None:
    global _term_requested
    _term_requested = True


def _should_stop(stop_file: str, device: torch.device) -> bool:
    """Every rank must stop at the same step or the next collective hangs: agree on the flag with an
    all_reduce."""
    flag = torch.tensor([1.0 if (_term_requested or (stop_file and os.path.exists(stop_file))) else 0.0])
    flag = flag.to(device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def broadcast_weights(params: list[Any], src: int = 0) -> None:
    """Every rank starts from rank `src`'s weights (what DistributedDataParallel does, from rank 0)."""
    for p in params:
        dist.broadcast(p.data, src=src)


def average_gradients(params: list[Any], world: int) -> None:
    """One all_reduce of every gradient, flattened, then each divided by the world size."""
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        g.copy_(part.view_as(g))


def weights_agree(params: list[Any], device: torch.device) -> bool:
    """Whether every rank holds the same weights (their sum, compared by MIN and MAX): what the broadcast and
    the averaged gradients keep, and what a rank that missed either would not."""
    total = torch.stack([p.detach().double().sum() for p in params]).sum().reshape(1).to(device)
    low, high = total.clone(), total.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    return bool(low.item() == high.item())


def sgd_step(params: list[Any], lr: float) -> None:
    """Plain SGD (p -= lr * grad), then the gradients cleared."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)
                p.grad = None


def _batch(
    step: int, shard: int, num_shards: int, part: tuple[int, int], device: torch.device
) -> tuple[Any, Any]:
    """Synthetic regression data; each shard (a node) draws from its own seed stream, and each of its local
    ranks (`part`: local rank, local world size) its own batch of it."""
    local_rank, local_world = part
    gen = torch.Generator().manual_seed((step * num_shards + shard) * local_world + local_rank)
    x = torch.randn(BATCH, 32, generator=gen)
    y = x.sum(dim=1, keepdim=True)
    return x.to(device), y.to(device)


def main() -> None:
    use_cuda = os.environ.get("TRAINSTACK_DEVICE", "cuda" if torch.cuda.is_available() else "cpu") == "cuda"
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=pg_timeout())
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    part = (local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    ckpt_dir = Path(os.environ.get("TRAINSTACK_CHECKPOINT_DIR", "checkpoints"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    stop_file = os.environ.get("TRAINSTACK_STOP_FILE", "")
    steps = trial_steps(
        os.environ.get("TRAINSTACK_TRIAL_STEPS", ""),
        int(os.environ.get("TRAINSTACK_POD_INDEX", "0")),
        int(os.environ.get("TRAINSTACK_STEPS", "300")),
    )
    every = int(os.environ.get("TRAINSTACK_CHECKPOINT_EVERY", "50"))
    pause = float(os.environ.get("TRAINSTACK_STEP_SLEEP_S", "0"))
    shard = int(os.environ.get("TRAINSTACK_SHARD_INDEX", "0"))
    num_shards = int(os.environ.get("TRAINSTACK_NUM_SHARDS", "1"))
    progress_file = os.environ.get("TRAINSTACK_PROGRESS_FILE", "") if local_rank == 0 else ""
    signal.signal(signal.SIGTERM, _on_term)

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
    params = list(model.parameters())
    world = dist.get_world_size()
    best, src = agreed_checkpoint(ckpt_dir, rank, world, device)
    first = max(best, 0)
    if rank == src and best >= 0:
        state = torch.load(ckpt_dir / f"step-{best:08d}.pt", map_location=device)
        model.load_state_dict(state["model"])  # an older checkpoint's "optim" (stateless SGD's) is not needed
    if rank == 0:
        origin = f"resumed from step-{best:08d}.pt" if best >= 0 else "fresh start"
        print(f"first step {first} ({origin})", flush=True)
    broadcast_weights(params, src)
    busy_file = os.environ.get("TRAINSTACK_BUSY_FILE", "") if local_rank == 0 else ""
    saver = AsyncSaver(ckpt_dir)

    step, tick = first, time.perf_counter()
    started = last_progress = tick
    last_progress_step = first
    saving = 0.0  # seconds the loop waited on checkpoint saves: the progress contract's checkpoint_s
    while step < steps:
        x, y = _batch(step, shard, num_shards, part, device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        average_gradients(params, world)
        sgd_step(params, LR)
        step += 1
        stop = _should_stop(stop_file, device)
        if step % every == 0 or step == steps or stop:
            # Every rank waits here for rank 0's save (a barrier), under every node's busy marker: each node's
            # agent then learns the save's length from its own checkpoint_s (train/node/hang.py), not rank 0's
            # node alone, whose peers would otherwise keep the 10-minute bound of a run never seen saving.
            began = time.perf_counter()
            with busy(busy_file, "saving"):  # the copy, and the previous write if it still runs
                if rank == 0:
                    saver.save(step, {"model": snapshot(model), "step": step, "lr": LR})
                dist.barrier(device_ids=[local_rank] if use_cuda else None)
            saving += time.perf_counter() - began
        if progress_file and step % LOG_EVERY == 0:
            now = time.perf_counter()
            per_step = (now - last_progress) / (step - last_progress_step)
            write_progress(progress_file, step, per_step, BATCH * world / per_step, loss.item(), saving)
            last_progress, last_progress_step = now, step
        if rank == 0 and step % LOG_EVERY == 0:
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} {LOG_EVERY / (now - tick):.1f} steps/s", flush=True)
            tick = now
        if stop:
            if rank == 0:
                print(f"stopping at step {step} (checkpoint saved)", flush=True)
            break
        if pause > 0:
            time.sleep(pause)
    saver.wait()  # the last checkpoint is whole before the start script's final sync
    agree = weights_agree(params, device)  # every rank takes part
    if rank == 0:
        took = time.perf_counter() - started
        peak = (
            f"; peak GPU memory {torch.cuda.max_memory_allocated(device) / 2**20:.1f} MiB" if use_cuda else ""
        )
        print(
            f"done: steps {first}..{step} in {took:.1f} s ({(step - first) / took:.1f} steps/s){peak}; "
            + (f"weights agree on {world} rank(s)" if agree else f"WEIGHTS DIFFER across {world} ranks"),
            flush=True,
        )
    dist.barrier(device_ids=[local_rank] if use_cuda else None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
