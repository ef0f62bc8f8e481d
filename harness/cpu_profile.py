"""`scripts/test --profile`: sum the per-file CPU records of a test run's workers, report them, keep them.

Each pytest process of the run (tests/cpu_profile.py) appends one JSON line (`Segment`) per stretch of one
test file it ran to `<run dir>/<worker>-<pid>.jsonl`: the CPU-seconds its whole process tree spent meanwhile
(harness/cpu_meter.py). `python -m harness.cpu_profile <run dir>` sums them per file (a file split between
workers or lanes is summed), prints the suite's total and its costliest files beside the previous run's,
and writes the whole table, costliest first, to `.state/test-profile/last.json` for the next run to compare.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Rows that are no test file: a pytest process's own start-up and collection (before its first test), and
# the xdist controller, which runs no test (its workers' CPU is theirs).
STARTUP = "(pytest start-up and collection)"
CONTROLLER = "(pytest-xdist controller)"
TOP = 10
KEEP_RUNS = 5  # run directories kept beside last.json (each holds its workers' raw records)
_RUN_NAME = re.compile(r"\d{8}T\d{6}Z-\d+")


@dataclass(frozen=True)
class Segment:
    """One stretch of one test file on one pytest process: a line of a worker's records."""

    file: str  # the file's node id (tests/e2e/test_up_output.py), or STARTUP / CONTROLLER
    cpu_s: float  # CPU-seconds of the process's whole tree during the stretch
    wall_s: float  # wall seconds of the stretch
    tests: int  # tests run in it
    worker: str  # xdist's worker id (gw0, ...), or "main" for a pytest without workers
    method: str  # how the CPU was read: cgroup, proc (harness/cpu_meter.py) or rusage (the controller)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Segment:
        data = json.loads(line)
        return cls(
            file=str(data["file"]),
            cpu_s=float(data["cpu_s"]),
            wall_s=float(data["wall_s"]),
            tests=int(data["tests"]),
            worker=str(data["worker"]),
            method=str(data["method"]),
        )


@dataclass(frozen=True)
class FileCost:
    """One row of the table: a test file's segments summed."""

    file: str
    cpu_s: float
    wall_s: float  # summed over its segments (parts on two workers at once count twice)
    tests: int
    segments: int


@dataclass(frozen=True)
class Profile:
    """A run's table, costliest file first; what last.json holds."""

    selection: str  # what ran: scripts/test's lane(s) and its pytest arguments
    created: str  # UTC, ISO 8601
    methods: tuple[str, ...]
    files: tuple[FileCost, ...]

    @property
    def total_cpu_s(self) -> float:
        return sum(row.cpu_s for row in self.files)

    @property
    def test_files(self) -> int:
        return sum(1 for row in self.files if row.file not in (STARTUP, CONTROLLER))

    def to_dict(self) -> dict[str, Any]:
        return {
            "selection": self.selection,
            "created": self.created,
            "methods": list(self.methods),
            "total_cpu_s": round(self.total_cpu_s, 3),
            "files": [asdict(row) for row in self.files],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        return cls(
            selection=str(data["selection"]),
            created=str(data["created"]),
            methods=tuple(str(m) for m in data["methods"]),
            files=tuple(FileCost(**row) for row in data["files"]),
        )


def read_segments(run_dir: Path) -> tuple[list[Segment], int]:
    """Every record under `run_dir`, and how many lines could not be read (a worker killed mid-line)."""
    segments, bad = [], 0
    for path in sorted(run_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                segments.append(Segment.from_json(line))
            except (ValueError, KeyError, TypeError):
                bad += 1
    return segments, bad


def merge(segments: Iterable[Segment]) -> tuple[FileCost, ...]:
    """One row per file, its segments summed; costliest first, ties by name."""
    rows: dict[str, FileCost] = {}
    for seg in segments:
        row = rows.get(seg.file, FileCost(seg.file, 0.0, 0.0, 0, 0))
        rows[seg.file] = FileCost(
            seg.file, row.cpu_s + seg.cpu_s, row.wall_s + seg.wall_s, row.tests + seg.tests, row.segments + 1
        )
    return tuple(sorted(rows.values(), key=lambda row: (-row.cpu_s, row.file)))


def build(segments: Sequence[Segment], selection: str, created: str) -> Profile:
    methods = tuple(sorted({seg.method for seg in segments}))
    return Profile(selection=selection, created=created, methods=methods, files=merge(segments))


def _signed(value: float) -> str:
    return f"{round(value, 1) + 0.0:+,.1f}"  # + 0.0: no "-0.0" for a change that rounds to nothing


def report(current: Profile, previous: Profile | None, top: int = TOP) -> list[str]:
    """What scripts/test prints: the total (against the previous run's), then the `top` costliest rows."""
    total = current.total_cpu_s
    lines = [
        f"== CPU profile: {total:,.1f} CPU-s in {current.test_files} test files "
        f"(selection: {current.selection}; method: {', '.join(current.methods) or 'none'})"
    ]
    before: dict[str, float] = {}
    if previous is not None:
        before = {row.file: row.cpu_s for row in previous.files}
        change = total - previous.total_cpu_s
        share = f" ({change / previous.total_cpu_s:+.1%})" if previous.total_cpu_s else ""
        lines.append(
            f"   previous run ({previous.created}): {previous.total_cpu_s:,.1f} CPU-s, "
            f"change {_signed(change)} CPU-s{share}"
        )
        if previous.selection != current.selection:
            lines.append(f"   (the previous run ran another selection: {previous.selection})")
    lines.append(f"   the {min(top, len(current.files))} costliest:")
    lines.append(f"   {'CPU-s':>9} {'share':>6} {'vs prev':>9} {'tests':>5}  file")
    for row in current.files[:top]:
        share = f"{row.cpu_s / total:.0%}" if total else "-"
        delta = "new" if row.file not in before else _signed(row.cpu_s - before[row.file])
        delta = "" if previous is None else delta
        lines.append(f"   {row.cpu_s:9,.1f} {share:>6} {delta:>9} {row.tests:5d}  {row.file}")
    return lines


def load(path: Path) -> Profile | None:
    """The profile at `path`, or None where there is none (or it cannot be read: a first run)."""
    try:
        return Profile.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(profile: Profile, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
    tmp.replace(path)


def prune(runs: Path, keep: int, current: Path) -> None:
    """Keep the `keep` newest run directories (their names start with the UTC time they began)."""
    old = sorted(p for p in runs.iterdir() if p.is_dir() and _RUN_NAME.fullmatch(p.name) and p != current)
    for path in old[: max(0, len(old) - (keep - 1))]:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cpu_profile", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="the run's directory of <worker>.jsonl records")
    parser.add_argument("--last", type=Path, help="the table to compare and replace (default: beside it)")
    parser.add_argument("--selection", default="", help="what ran, kept in the table (scripts/test's lanes)")
    parser.add_argument("--top", type=int, default=TOP)
    args = parser.parse_args(argv)
    last: Path = args.last or args.run_dir.parent / "last.json"
    segments, bad = read_segments(args.run_dir)
    if not segments:
        print(f"== CPU profile: no records under {args.run_dir} (did pytest run any test?)", file=sys.stderr)
        return 1
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    profile = build(segments, args.selection, created)
    for line in report(profile, load(last), args.top):
        print(line)
    if bad:
        print(f"   ({bad} unreadable record lines left out)")
    save(profile, args.run_dir / "profile.json")
    save(profile, last)
    print(f"   whole table: {last}")
    prune(args.run_dir.parent, KEEP_RUNS, args.run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
