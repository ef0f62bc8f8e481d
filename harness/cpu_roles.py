"""Where a command's CPU goes, by the role of each process (`python -m harness.cpu_roles -- <command>`).

The command runs in a cgroup v2 group of its own (as harness/cpu_meter.py's CgroupMeter), so its total is
exact: every process it starts stays in the group, daemons and network-namespace hosts included. Which
process spent it is sampled: every `--interval` seconds each process of the group is read from /proc (its
own user + system CPU, not its reaped children's, so nothing counts twice) and named a role by its command
line (ROLES, first match). A process's CPU after its last sample, or a process that lived between two
samples, is not seen: the report shows that remainder as `(unseen)`, the total less what was attributed.
Root only (the group); a measuring tool for docs/PERFORMANCE.md, not used by the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.cpu_meter import _cgroup2_mount, _own_cgroup, _usage_s

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

# (role, pattern over the NUL-joined-with-spaces command line); the first that matches names the process.
ROLES: tuple[tuple[str, str], ...] = (
    # Before the rest: a test's temporary paths (/tmp/pytest-of-…) are on many other command lines.
    ("pytest", r"-m pytest|bin/pytest|exec\(eval\(sys\.stdin"),
    ("uv / pip / compileall (installs)", r"\buv\b|\bpip\b|compileall"),
    ("node: torchrun agent", r"torchrun|torch\.distributed\.run"),
    # A worker of the one launch per boot (train/node/launch.py): its preflight child, then its training.
    ("node: preflight and training (one launch)", r"train\.node\.launch"),
    ("node: training", r"train/(train|gpt_train)\.py"),
    ("node: bucket sync", r"transfer\.py|node\.transfer"),
    ("node: preflight", r"preflight"),
    ("node: healthgate", r"healthgate"),
    ("node: metrics agent", r"node/agent\.py|node\.agent"),
    ("node: monitor/aggregator", r"train/monitor|aggregat"),
    ("node: start script (bash)", r"start-node-"),
    ("sshd / ssh / scp", r"^(\S*/)?(sshd|ssh|scp)\b|sshd:"),
    # The CLI before the policy pack: its own command line names the pack (`--policy-pack policy`).
    ("pulumi: CLI", r"^(\S*/)?pulumi\s"),
    ("pulumi: policy pack", r"policy"),
    ("pulumi: dynamic provider", r"pulumi-resource|dynamic_provider|provider_host|tools/provider"),
    ("pulumi: language host", r"pulumi-language"),
    ("pulumi: program / Automation API", r"__main__\.py|pulumi"),
    ("local RunPod (emulator)", r"emulator"),
    ("moto S3", r"moto"),
    ("supervisor", r"supervis"),
    ("scripts/watch", r"watch"),
    ("git", r"^(\S*/)?git\s"),
    ("other python", r"python"),
    ("shell", r"^(\S*/)?(ba)?sh\s"),
)


def role_of(cmdline: str) -> str:
    """The role of a process by its command line (pure)."""
    for role, pattern in ROLES:
        if re.search(pattern, cmdline):
            return role
    first = cmdline.split(" ", 1)[0]
    return f"other: {Path(first).name or '?'}"


@dataclass
class Census:
    """The last reading of every process seen in the group, by (pid, start time)."""

    seen: dict[tuple[int, int], tuple[str, float]] = field(default_factory=dict)

    def sample(self, group: Path) -> None:
        for procs in group.rglob("cgroup.procs"):
            try:
                pids = procs.read_text().split()
            except OSError:
                continue
            for pid in pids:
                self._read(int(pid))

    def _read(self, pid: int) -> None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            key = (pid, int(fields[19]))
            cpu_s = (int(fields[11]) + int(fields[12])) * _TICK_S
            if key in self.seen:
                self.seen[key] = (self.seen[key][0], cpu_s)
                return
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return  # ended while read
        self.seen[key] = (role_of(raw.replace(b"\0", b" ").decode(errors="replace").strip()), cpu_s)

    def by_role(self) -> dict[str, tuple[float, int]]:
        out: dict[str, tuple[float, int]] = {}
        for role, cpu_s in self.seen.values():
            total, count = out.get(role, (0.0, 0))
            out[role] = (total + cpu_s, count + 1)
        return out


def measure(argv: Sequence[str], interval: float) -> tuple[int, float, float, dict[str, tuple[float, int]]]:
    """Run argv in a new group; (exit code, total CPU-s, wall s, CPU-s and process count per role)."""
    parent = _cgroup2_mount() / _own_cgroup().lstrip("/")
    group = parent / f"trainstack-roles-{os.getpid()}"
    group.mkdir()
    started = time.monotonic()
    census = Census()
    try:
        child = subprocess.Popen(
            argv, preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid()))
        )
        while child.poll() is None:
            census.sample(group)
            try:
                time.sleep(interval)
            except KeyboardInterrupt:
                child.send_signal(signal.SIGINT)  # the command tears down as it would alone
        census.sample(group)
        total = _usage_s(group)
    finally:
        for procs in sorted(group.rglob("cgroup.procs"), key=lambda p: -len(p.parts)):
            for pid in procs.read_text().split():  # leftovers go back to the parent so the group can go
                try:
                    (parent / "cgroup.procs").write_text(pid)
                except OSError:
                    continue
        for sub in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            sub.rmdir()
        group.rmdir()
    return child.returncode, total, time.monotonic() - started, census.by_role()


def report(total: float, wall: float, roles: dict[str, tuple[float, int]]) -> list[str]:
    lines = [f"total {total:.1f} CPU-s in {wall:.0f} s wall", "| role | CPU-s | processes |"]
    lines.append("| --- | ---: | ---: |")
    for role, (cpu_s, count) in sorted(roles.items(), key=lambda item: -item[1][0]):
        if cpu_s >= 0.05:
            lines.append(f"| {role} | {cpu_s:.1f} | {count} |")
    unseen = total - sum(cpu_s for cpu_s, _ in roles.values())
    lines.append(f"| (unseen: after a last sample, or between two) | {unseen:.1f} | |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cpu_roles", description=__doc__)
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("command", nargs="+", help="the command to measure (after --)")
    args = parser.parse_args(argv)
    rc, total, wall, roles = measure(args.command, args.interval)
    print("\n".join(report(total, wall, roles)), file=sys.stderr)
    if args.json:
        data = {"command": args.command, "rc": rc, "total_cpu_s": total, "wall_s": wall, "roles": roles}
        args.json.write_text(json.dumps(data, indent=1))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
