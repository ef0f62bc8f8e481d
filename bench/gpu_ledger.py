"""The goodput ledger of a GPU validation run, from the records the run wrote.

    python -m bench.gpu_ledger pack          # print the device command (bench/gpu_ledger_run.py, packed)
    python -m bench.gpu_ledger lease DIR --end UNIX_TIME --held-s S [--gpus 1]
                                             # write DIR/lease.json: the lease that billed the run
    python -m bench.gpu_ledger report DIR    # the ledger table of the records in DIR

The run (bench/gpu_ledger_run.py) writes events.jsonl (its phases begun/done and the faults it induced),
progress.jsonl (the job's progress contract lines) and health.json. What billed is the lease of the GPU
machine: `lease` records it from the device tool's own figures (held seconds at give-back, and the time of
the give-back; the lease began that many seconds earlier). The ledger is supervisor/ledger.py's `build`,
over these inputs:

    compute       the lease, 1 span per phase of the node's bring-up, each with its own first answer, so
                  that boot counts as provisioning and the gate as health:
                  lease start .. the first gate   (machine start, delivery, data shards: provisioning)
                  the first gate .. the first job start   (health gate, preflight, burn-in: health)
                  the first job start .. release          (answered at the job's first step)
    progress      every contract line, and for each start of the job its first step (the resumed step, at
                  the line's time less the steps since the resume times the mean step time it reports)
    health        each gate_begun .. gate_done and preflight_begun .. preflight_done
    checkpoints   inferred from the progress lines: between two lines of one start whose steps cross a
                  checkpoint step (a multiple of checkpoint_every, or the stop step after a SIGTERM), the
                  wall time beyond the steps' own time is the checkpoint's stall, ending at the later line
                  (the job writes the checkpoint, then the line)
    recoveries    each fault .. the first step of the next start
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import pack
from supervisor.ledger import CATEGORIES, Inputs, Ledger, Point, Span, build
from train.node.progress import Progress, ProgressError, parse_line

RUNNER = Path(__file__).with_name("gpu_ledger_run.py")
PREFIX = "nvidia-smi>$OUT/log.txt;"  # the machine's GPU, driver and CUDA first in the log


class RecordsError(ValueError):
    """A record is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class Records:
    events: list[dict[str, Any]]
    progress: list[Progress]
    lease: dict[str, float]  # start, end (Unix time), gpus
    health: dict[str, Any]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RecordsError(
            f"{path} is missing: the run writes it under $OUT (bench/gpu_ledger_run.py)"
        ) from None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    lines = _lines(path)
    out = []
    for number, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordsError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("t", obj.get("time")), int | float):
            raise RecordsError(f"{path}:{number}: a record needs a time ('t' or 'time')")
        out.append(obj)
    return out


def load(directory: Path) -> Records:
    """The records of one run; RecordsError names what is missing or wrong."""
    events = _jsonl(directory / "events.jsonl")
    progress = []
    for number, line in enumerate(_lines(directory / "progress.jsonl"), 1):
        try:
            p = parse_line(line)
        except ProgressError as exc:
            raise RecordsError(f"{directory / 'progress.jsonl'}:{number}: {exc}") from None
        if p.time is None:
            raise RecordsError(f"{directory / 'progress.jsonl'}:{number}: 'time' is needed for the ledger")
        progress.append(p)
    lease_path = directory / "lease.json"
    if not lease_path.exists():
        raise RecordsError(
            f"{lease_path} is missing: write it with `python -m bench.gpu_ledger lease {directory} "
            "--end GIVE_BACK_TIME --held-s HELD_S` from the device tool's figures"
        )
    lease = json.loads(lease_path.read_text(encoding="utf-8"))
    for key in ("start", "end", "gpus"):
        if not isinstance(lease.get(key), int | float):
            raise RecordsError(f"{lease_path}: '{key}' must be a number")
    if lease["end"] <= lease["start"]:
        raise RecordsError(f"{lease_path}: 'end' must be after 'start'")
    health_path = directory / "health.json"
    health = json.loads(health_path.read_text(encoding="utf-8")) if health_path.exists() else {}
    return Records(sorted(events, key=lambda e: e["t"]), sorted(progress, key=_time), lease, health)


def _time(p: Progress) -> float:
    assert p.time is not None  # load() refuses lines without one
    return p.time


@dataclass(frozen=True)
class Start:
    """One start of the job: its window, its contract lines, the step it resumed from."""

    run: int
    begun: float
    done: float
    lines: list[Progress]
    resumed: int
    checkpoint_every: int
    stopped: bool  # a SIGTERM asked it to stop (it checkpoints at the stop step)

    @property
    def first_step_at(self) -> float | None:
        """When the job began its first step: the first line's time less the steps it reports."""
        if not self.lines:
            return None
        first = self.lines[0]
        return _time(first) - (first.step - self.resumed) * first.step_time_s


def starts(records: Records) -> list[Start]:
    events, out = records.events, []
    newest = 0  # the newest checkpoint the node holds: the step the next start resumes from
    for begun in (e for e in events if e["event"] == "train_begun"):
        run = begun["run"]
        done = next((e for e in events if e["event"] == "train_done" and e["run"] == run), None)
        end = done["t"] if done else records.lease["end"]
        lines = [p for p in records.progress if begun["t"] <= _time(p) <= end]
        fault = next((e for e in events if e["event"] == "fault" and e["run"] == run), None)
        stopped = fault is not None and fault["how"] == "SIGTERM"
        out.append(Start(run, begun["t"], end, lines, newest, int(begun["checkpoint_every"]), stopped))
        names = done.get("checkpoints", []) if done else []
        steps = [int(n[5:13]) for n in names if n.startswith("step-") and n[5:13].isdigit()]
        newest = max([newest, *steps])
    return out


def checkpoint_spans(start: Start) -> list[Span]:
    """The checkpoint stalls of one start, from its contract lines (see the module's docstring)."""
    spans = []
    for i, (a, b) in enumerate(zip(start.lines, start.lines[1:], strict=False)):
        every = start.checkpoint_every
        crossed = every > 0 and b.step // every > a.step // every
        last = i == len(start.lines) - 2
        if crossed or (last and start.stopped):
            excess = (_time(b) - _time(a)) - (b.step - a.step) * b.step_time_s
            if excess > 0:
                spans.append(Span(_time(b) - excess, _time(b)))
    return spans


def ledger_inputs(records: Records) -> Inputs:
    events, lease = records.events, records.lease
    gpus = int(lease["gpus"])
    job = starts(records)
    if not job or job[0].first_step_at is None:
        raise RecordsError("the records hold no start of the job with a progress line: nothing trained")
    first_gate = next(e["t"] for e in events if e["event"] == "gate_begun")
    first_step = job[0].first_step_at
    assert first_step is not None
    compute = (
        Span(lease["start"], first_gate, gpus),
        Span(first_gate, job[0].begun, gpus),
        Span(job[0].begun, lease["end"], gpus),
    )
    progress = [Point(_time(p), p.step) for p in records.progress]
    progress += [Point(s.first_step_at, s.resumed) for s in job if s.first_step_at is not None]
    health = []
    for kind in ("gate", "preflight"):
        for begun in (e for e in events if e["event"] == f"{kind}_begun"):
            done = next(
                (e for e in events if e["event"] == f"{kind}_done" and e["run"] == begun["run"]), None
            )
            health.append(Span(begun["t"], done["t"] if done else lease["end"]))
    recoveries = []
    for fault in (e for e in events if e["event"] == "fault"):
        after = [s.first_step_at for s in job if s.begun > fault["t"] and s.first_step_at is not None]
        recoveries.append(Span(fault["t"], after[0] if after else lease["end"]))
    return Inputs(
        compute=compute,
        progress=tuple(sorted(progress, key=lambda p: p.time)),
        health=tuple(health),
        checkpoints=tuple(span for s in job for span in checkpoint_spans(s)),
        recoveries=tuple(recoveries),
        first_answer=(first_gate, first_gate, first_step),
    )


def table(ledger: Ledger) -> str:
    """The ledger in GPU-seconds (a validation run lasts minutes, too short for GPU-hours)."""
    billed = ledger.billed_gpu_seconds
    rows = ["category       GPU-s    share"]
    for c in CATEGORIES:
        gs = ledger.gpu_seconds.get(c, 0.0)
        rows.append(f"{c:<13} {gs:>7.1f} {gs / billed if billed else 0.0:>7.1%}")
    rows.append(f"{'billed':<13} {billed:>7.1f} {1:>7.1%}")
    rows.append(f"goodput {ledger.goodput:.1%} (productive / billed)")
    return "\n".join(rows)


def report(directory: Path) -> str:
    records = load(directory)
    inputs = ledger_inputs(records)
    ledger = build(inputs)
    faults = [f"{e['how']} at step {e['step']}" for e in records.events if e["event"] == "fault"]
    gate = records.health.get("status", "no record")
    head = f"goodput ledger of {directory.name}: {len(starts(records))} starts, faults: {', '.join(faults)}"
    return f"{head}; health record: {gate}\n{table(ledger)}"


def write_lease(directory: Path, end: float, held_s: float, gpus: int) -> Path:
    """lease.json: the lease ended (was given back) at `end` after `held_s` seconds held."""
    if held_s <= 0 or gpus < 1:
        raise RecordsError("--held-s must be above 0 and --gpus at least 1")
    path = directory / "lease.json"
    lease = {"start": end - held_s, "end": end, "gpus": gpus, "held_s": held_s}
    path.write_text(json.dumps(lease, indent=1) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("pack", help="print the device command")
    lease = sub.add_parser("lease", help="write DIR/lease.json from the device tool's figures")
    lease.add_argument("dir", type=Path)
    lease.add_argument("--end", type=float, required=True, help="Unix time of the give-back")
    lease.add_argument("--held-s", type=float, required=True, help="seconds the lease was held, as billed")
    lease.add_argument("--gpus", type=int, default=1)
    rep = sub.add_parser("report", help="the ledger of the records in DIR")
    rep.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.verb == "pack":
            print(pack.command(RUNNER, PREFIX, env=False), end="")
        elif args.verb == "lease":
            print(write_lease(args.dir, args.end, args.held_s, args.gpus))
        else:
            print(report(args.dir))
    except (RecordsError, pack.PackError) as exc:
        print(f"bench.gpu_ledger: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
