"""A hang says where it hangs: the node's training ranks, their Python stacks and NCCL's flight
recorder, bundled to the bucket; and a failed job's cause read from its log.

    python -m train.node.diagnostics heartbeat [--every-s 30]   # background: <heartbeat dir>/<node>.json
    python -m train.node.diagnostics collect --bucket B --stamp T [--env-of PIDFILE]
                                                   # one bundle to run/<run id>/diagnostics/T/<node>/
    python -m train.node.diagnostics classify LOGFILE            # nccl_timeout | oom | config | (nothing)

The ranks are the processes whose environment torchrun gave a RANK (read from /proc: only RANK, LOCAL_RANK
and the pid, never another variable, so no secret reaches a bundle). A rank stopped by a signal shows as
process state `T`; the others show, in `py-spy dump`, the collective they wait in. The flight recorder is
PyTorch's own (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT: each rank dumps its last collectives
on a watchdog timeout to TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>, on the workdir's volume); the start script
turns it on. `collect` runs in an SSH session (scripts/supervise), which lacks the start script's
environment: --env-of takes the run id, the flight recorder's path and the S3 client's settings (AWS_*,
TRAINSTACK_*, TORCH_NCCL_*) from the start script's own /proc environ, into this process only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

# The first pattern that matches a log line, newest line first, names the cause (supervisor/recover.py
# decides the retry from it). Texts are PyTorch's and the start script's own.
CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED")),
    (
        "nccl_timeout",
        re.compile(
            r"Watchdog caught collective operation timeout|NCCL.*[Tt]imed? ?out|ProcessGroupNCCL.*timeout"
        ),
    ),
    (
        "config",
        re.compile(
            r"TRAINSTACK_FAIL config|error: unrecognized arguments|No such file or directory: '.*\.py'"
        ),
    ),
)
_SECRET_HINT = re.compile(r"(?i)(key|token|secret|password)=\S+")


@dataclass(frozen=True)
class Rank:
    pid: int
    rank: int | None
    local_rank: int | None
    state: str  # /proc state letter: R running, S sleeping, T stopped, Z zombie, D disk wait

    @property
    def stopped(self) -> bool:
        return self.state in ("T", "t")


def classify(lines: Iterable[str]) -> str | None:
    """The cause of a failed job from its log, or None."""
    tail = list(lines)[-400:]
    for line in reversed(tail):
        for cause, pattern in CAUSES:
            if pattern.search(line):
                return cause
    return None


def _env_value(raw: bytes, name: str) -> str | None:
    for item in raw.split(b"\0"):
        if item.startswith(name.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def ranks(proc: Path = Path("/proc")) -> list[Rank]:
    """Processes that torchrun started as ranks (RANK and LOCAL_RANK set), in rank order."""
    found = []
    try:
        own_net = os.readlink(proc / "self" / "ns" / "net")
    except OSError:
        own_net = None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
            # This node's ranks only: emulated hosts are network namespaces that share the host's pids (a
            # RunPod container has pids of its own, where every process is in the same namespace anyway).
            if own_net is not None and os.readlink(entry / "ns" / "net") != own_net:
                continue
        except OSError:
            continue  # gone, or not ours to read
        rank, local = _env_value(env, "RANK"), _env_value(env, "LOCAL_RANK")
        if rank is None or local is None or _env_value(env, "TORCHELASTIC_RUN_ID") is None:
            continue
        state = stat.rsplit(")", 1)[-1].split()[0]
        found.append(
            Rank(
                int(entry.name),
                int(rank) if rank.isdigit() else None,
                int(local) if local.isdigit() else None,
                state,
            )
        )
    return sorted(found, key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.pid))


ENV_KEPT = ("AWS_", "TRAINSTACK_", "TORCH_NCCL_")


def env_of(pid: int, proc: Path = Path("/proc")) -> dict[str, str]:
    """The start script's variables this tool needs (ENV_KEPT prefixes), from its /proc environ."""
    raw = (proc / str(pid) / "environ").read_bytes()
    out = {}
    for item in raw.split(b"\0"):
        name, _, value = item.decode(errors="replace").partition("=")
        if name.startswith(ENV_KEPT):
            out[name] = value
    return out


def py_spy(pid: int, timeout_s: float = 30.0) -> str:
    """`py-spy dump` of one process (its threads' Python stacks); the error in one line when it cannot."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        out = subprocess.run(
            [exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"py-spy dump --pid {pid}: {type(exc).__name__}"
    return _SECRET_HINT.sub(r"\1=<hidden>", out.stdout or out.stderr)


def summary(node: str, found: Sequence[Rank]) -> str:
    """One line naming the stopped ranks, for the alert."""
    stopped = [r for r in found if r.stopped]
    if stopped:
        names = ", ".join(f"rank {r.rank} (pid {r.pid})" for r in stopped)
        others = len(found) - len(stopped)
        return f"node {node}: {names} stopped (state T); the other {others} rank(s) wait on it"
    return (
        f"node {node}: {len(found)} rank(s), none stopped: see their stacks for the collective they wait in"
    )


def bundle(out: Path, node: str, found: Sequence[Rank], trace_prefix: str | None) -> Path:
    """Write one node's bundle into `out`: ranks.json, a py-spy dump per rank, the flight recorder dumps."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "ranks.json").write_text(
        json.dumps(
            {"node": node, "summary": summary(node, found), "ranks": [asdict(r) for r in found]}, indent=2
        )
    )
    # Every rank's stack at once: one at a time, 8 ranks could take 8 x py-spy's timeout before a restart.
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(found)))) as pool:
        stacks = list(pool.map(lambda r: py_spy(r.pid), found))
    for r, stack in zip(found, stacks, strict=True):
        (out / f"py-spy-rank{r.rank}-pid{r.pid}.txt").write_text(stack)
    if trace_prefix:
        folder = Path(trace_prefix).parent
        stem = Path(trace_prefix).name
        for dump in sorted(folder.glob(stem + "*")) if folder.is_dir() else []:
            shutil.copyfile(dump, out / f"nccl-trace-{dump.name}")
    return out


def upload(s3: object, bucket: str, prefix: str, folder: Path) -> list[str]:
    keys = []
    for path in sorted(folder.iterdir()):
        key = f"{prefix}{path.name}"
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())  # type: ignore[attr-defined]
        keys.append(key)
    return keys


def heartbeat(folder: Path, node: str, every_s: float, rounds: int | None = None) -> None:
    """Every `every_s`, `<folder>/<node>.json`: the time and each rank's state (atomic writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = 0
    while rounds is None or done < rounds:
        body = {"time": time.time(), "node": node, "ranks": [asdict(r) for r in ranks()]}
        tmp = folder / f".{node}.json.tmp"
        tmp.write_text(json.dumps(body))
        os.replace(tmp, folder / f"{node}.json")
        done += 1
        if rounds is None or done < rounds:
            time.sleep(every_s)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.node.diagnostics", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    hb = sub.add_parser("heartbeat")
    hb.add_argument("--every-s", type=float, default=30.0)
    col = sub.add_parser("collect")
    col.add_argument("--bucket", required=True)
    col.add_argument("--stamp", required=True)
    col.add_argument("--env-of", type=Path, help="the start script's pid file: read its environment")
    cls = sub.add_parser("classify")
    cls.add_argument("log", type=Path)
    args = p.parse_args(argv)
    node = os.environ.get("RUNPOD_POD_ID") or os.uname().nodename
    workdir = Path(os.environ.get("TRAINSTACK_WORKDIR") or ".")
    if args.mode == "classify":
        try:
            print(classify(args.log.read_text(errors="replace").splitlines()) or "")
        except OSError:
            print("")
        return 0
    if args.mode == "heartbeat":
        heartbeat(
            Path(os.environ.get("TRAINSTACK_HEARTBEAT_DIR") or workdir / ".run" / "heartbeat"),
            node,
            args.every_s,
        )
        return 0
    if args.env_of is not None and args.env_of.is_file():
        os.environ.update(env_of(int(args.env_of.read_text().strip())))
        workdir = Path(os.environ.get("TRAINSTACK_WORKDIR") or workdir)
    import boto3

    found = ranks()
    if found:  # what the start script exported after it began (run id, S3 endpoint): its ranks have it
        os.environ.update(env_of(found[0].pid))
    run_id = os.environ.get("TRAINSTACK_RUN_ID") or "unknown-run"
    out = bundle(
        workdir / "diagnostics" / args.stamp / node,
        node,
        found,
        os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
    )
    prefix = f"run/{run_id}/diagnostics/{args.stamp}/{node}/"
    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)  # as transfer.py
    keys = upload(s3, args.bucket, prefix, out)
    print(f"{summary(node, found)}; {len(keys)} file(s) to s3://{args.bucket}/{prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
