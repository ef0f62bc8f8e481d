"""Measure a running process's CPU share and memory from /proc (the metrics agent's cost budget).

    python3 bench/gpu/agent_cost.py PID SECONDS [INTERVAL_S]

Prints one line: mean CPU % of one core over the window, and the largest resident set seen (MiB).
Standard library only, so it runs on the GPU machine and on CPU nodes alike.
"""

from __future__ import annotations

import os
import sys
import time


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); counted here after the command name's ")".
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    pid, seconds = int(sys.argv[1]), float(sys.argv[2])
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    peak = rss_mib(pid)
    while time.monotonic() - start < seconds:
        time.sleep(interval)  # a measuring tool: it samples /proc on a fixed period by design
        peak = max(peak, rss_mib(pid))
    wall = time.monotonic() - start
    share = 100 * (cpu_seconds(pid) - start_cpu) / wall
    print(f"pid {pid}: cpu {share:.2f}% of one core over {wall:.0f} s, peak RSS {peak:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
