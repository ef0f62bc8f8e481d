"""The CPU-seconds a pytest worker's whole process tree spends, read per test file (scripts/test --profile).

`start_meter` picks the first of two ways that works here (docs/PERFORMANCE.md, "CPU per test file"):

- `CgroupMeter`: the worker moves itself into a cgroup v2 group of its own, a child of the group it runs in.
  Every process it starts from then on is born in that group and stays there whatever it does (a daemon that
  forks away, an sshd session's `setsid nohup` start script, a process in a network namespace), and the
  group's `cpu.stat` counts the CPU of all of them, the ended ones included. Needs a writable cgroup2 mount.
- `ProcMeter`: /proc alone, where no group can be made (not root, no cgroup2). It sums, over the live
  processes of the tree, their own CPU and that of the children they reaped (`/proc/<pid>/stat`): the worker,
  its descendants, and processes outside them that carry the worker's `TRAINSTACK_TEST_WORKER` mark in their
  environment, with their descendants. A process that leaves the tree and ends between two reads is lost
  (init reaps it), and so is one that never carried the mark and was orphaned before a read saw it.

Both count from the worker's start: the CPU it spent before the meter began is read from getrusage.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

WORKER_MARK = "TRAINSTACK_TEST_WORKER"  # env mark ProcMeter finds the worker's processes by (also orphans)
METHOD_ENV = "TRAINSTACK_TEST_PROFILE_METHOD"  # "proc": skip the cgroup even where one can be made
GROUP_PREFIX = "trainstack-test-"
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


class Meter(Protocol):
    """Reads the CPU-seconds the worker's process tree has spent since the worker started."""

    method: str

    def read(self) -> float: ...

    def close(self) -> None: ...


def _rusage_s() -> float:
    """CPU of this process and of the children it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cgroup2_mount() -> Path:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise OSError("no cgroup2 file system is mounted")


def _own_cgroup() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise OSError("this process is in no cgroup v2 group")


def _usage_s(group: Path) -> float:
    for line in (group / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"{group}/cpu.stat has no usage_usec")


def _sweep(parent: Path) -> None:
    """Remove the empty groups of workers that are gone (a group still holding a process stays)."""
    for group in parent.glob(f"{GROUP_PREFIX}*"):
        pid = group.name.removeprefix(GROUP_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                group.rmdir()


class CgroupMeter:
    """The worker's own cgroup v2 group: exact, orphans and ended processes included."""

    method = "cgroup"

    def __init__(self, group: Path, parent: Path, before_s: float) -> None:
        self.group, self.parent, self.before_s = group, parent, before_s

    @classmethod
    def start(cls, name: str) -> CgroupMeter:
        """Move this process into a new group `trainstack-test-<pid>-<name>`; OSError where it cannot."""
        parent = _cgroup2_mount() / _own_cgroup().lstrip("/")
        _sweep(parent)
        group = parent / f"{GROUP_PREFIX}{os.getpid()}-{name}"
        group.mkdir()
        before_s = _rusage_s()
        try:
            (group / "cgroup.procs").write_text(str(os.getpid()))
            _usage_s(group)
        except OSError:
            with contextlib.suppress(OSError):
                (parent / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
            raise
        return cls(group, parent, before_s)

    def read(self) -> float:
        return self.before_s + _usage_s(self.group)

    def close(self) -> None:
        """Back to the parent group; the group goes unless a process that outlived its test still holds it."""
        with contextlib.suppress(OSError):
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.group.rmdir()


@dataclass(frozen=True)
class Proc:
    """One line of /proc/<pid>/stat, as much as the tree's account needs."""

    pid: int
    ppid: int
    start: int  # starttime, clock ticks after boot: with the pid, names one process across reads
    cpu_s: float  # its own user + system CPU, plus that of the children it has reaped


def parse_stat(text: str) -> Proc:
    """A /proc/<pid>/stat line (the command in parentheses may hold spaces and parentheses)."""
    pid = int(text[: text.index(" ")])
    fields = text[text.rindex(")") + 2 :].split()  # from field 3 (state) on
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return Proc(pid=pid, ppid=int(fields[1]), start=int(fields[19]), cpu_s=ticks * _TICK_S)


class TreeAccount:
    """The CPU a process tree has spent, from successive snapshots of the processes alive (pure).

    The tree is `root` and its descendants, every process a snapshot calls marked and its descendants, and
    every process an earlier snapshot counted, for as long as it lives (an orphan stays in). Its CPU is the
    sum of what its live processes have spent, each with the children it reaped, plus the last-read CPU of
    those that ended where no live process of the tree reaped them: a process that ended is taken as reaped
    by its parent when last seen or, if that one ended too, by the nearest ancestor still alive in the tree;
    when the chain leaves the tree (init reaped an orphan), its last reading is kept. What ran after that
    reading, or in a process that started and ended outside the tree between two snapshots, is not seen.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.counted: dict[tuple[int, int], Proc] = {}
        self.departed_s = 0.0

    def update(self, procs: Mapping[int, Proc], marked: Callable[[Proc], bool]) -> float:
        children: dict[int, list[int]] = {}
        for each in procs.values():
            children.setdefault(each.ppid, []).append(each.pid)
        stack = [self.root] + [p.pid for p in procs.values() if (p.pid, p.start) in self.counted or marked(p)]
        now: dict[tuple[int, int], Proc] = {}
        while stack:
            proc = procs.get(stack.pop())
            if proc is None or (proc.pid, proc.start) in now:
                continue
            now[(proc.pid, proc.start)] = proc
            stack.extend(children.get(proc.pid, ()))
        alive = {pid for pid, _ in now}
        before = {pid: proc for (pid, _), proc in self.counted.items()}
        for key, proc in self.counted.items():
            if key not in now and not _reaped_in_tree(proc, alive, before):
                self.departed_s += proc.cpu_s
        self.counted = now
        return self.departed_s + sum(proc.cpu_s for proc in now.values())


def _reaped_in_tree(gone: Proc, alive: set[int], before: Mapping[int, Proc]) -> bool:
    ppid, seen = gone.ppid, {gone.pid}
    while ppid not in seen:
        if ppid in alive:
            return True
        seen.add(ppid)
        parent = before.get(ppid)
        if parent is None:
            return False
        ppid = parent.ppid
    return False


class ProcMeter:
    """/proc walks at each read (a few milliseconds per file boundary): see TreeAccount for what it misses."""

    method = "proc"

    def __init__(self, name: str) -> None:
        self.mark = f"{WORKER_MARK}={name}".encode()
        os.environ[WORKER_MARK] = name  # inherited by every process the worker starts from now on
        self.account = TreeAccount(os.getpid())
        self.marks: dict[tuple[int, int], bool] = {}

    def _marked(self, proc: Proc) -> bool:
        key = (proc.pid, proc.start)
        if key not in self.marks:
            try:
                environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
            except OSError:
                environ = b""
            self.marks[key] = self.mark in environ.split(b"\0")
        return self.marks[key]

    def read(self) -> float:
        procs: dict[int, Proc] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    procs[int(entry.name)] = parse_stat(Path(entry.path, "stat").read_text())
                except (OSError, ValueError, IndexError):
                    continue  # ended while we read
        total = self.account.update(procs, self._marked)
        self.marks = {key: mark for key, mark in self.marks.items() if key[0] in procs}
        return total

    def close(self) -> None:
        os.environ.pop(WORKER_MARK, None)


def start_meter(name: str) -> Meter:
    """A cgroup meter where this machine allows one (and TRAINSTACK_TEST_PROFILE_METHOD is not `proc`),
    else a /proc meter."""
    if os.environ.get(METHOD_ENV) != "proc":
        with contextlib.suppress(OSError):
            return CgroupMeter.start(name)
    return ProcMeter(name)
