"""harness/cpu_meter.py: what each way of reading a worker's tree counts (scripts/test --profile).

The /proc account is pure and checked on made-up snapshots; each meter is then checked once on real
processes, in a child Python (a cgroup meter moves its process into a group of its own: not this test's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cpu_meter import METHOD_ENV, Proc, TreeAccount, parse_stat

REPO = Path(__file__).resolve().parents[2]
ROOT = 100


def snap(*procs: Proc) -> dict[int, Proc]:
    return {proc.pid: proc for proc in procs}


def p(pid: int, ppid: int, cpu_s: float) -> Proc:
    return Proc(pid=pid, ppid=ppid, start=pid * 10, cpu_s=cpu_s)


def unmarked(proc: Proc) -> bool:
    return False


def test_parse_stat_reads_a_command_with_spaces_and_parentheses() -> None:
    line = "4242 (my (odd) cmd) S 4000 4242 4242 0 -1 4194560 0 0 0 0 150 50 30 20 20 0 1 0 987654 0 0"
    proc = parse_stat(line)
    assert (proc.pid, proc.ppid, proc.start) == (4242, 4000, 987654)
    assert proc.cpu_s == pytest.approx(250 / os.sysconf("SC_CLK_TCK"))  # utime + stime + cutime + cstime


def test_the_tree_is_the_root_and_its_descendants_and_nothing_else() -> None:
    account = TreeAccount(ROOT)
    stranger = p(900, 1, 7.0)
    total = account.update(snap(p(ROOT, 1, 2.0), p(101, ROOT, 1.0), p(102, 101, 0.5), stranger), unmarked)
    assert total == pytest.approx(3.5)


def test_a_child_reaped_by_its_parent_is_counted_once() -> None:
    account = TreeAccount(ROOT)
    account.update(snap(p(ROOT, 1, 2.0), p(101, ROOT, 1.0), p(102, 101, 0.5)), unmarked)
    # 102 ended and 101 reaped it: its 0.5 s (and 0.25 s more it ran since) is now in 101's cutime.
    total = account.update(snap(p(ROOT, 1, 2.0), p(101, ROOT, 1.75)), unmarked)
    assert total == pytest.approx(3.75)
    # 101 ended too and the root reaped it (and with it, 102).
    assert account.update(snap(p(ROOT, 1, 3.75)), unmarked) == pytest.approx(3.75)


def test_a_grandchild_whose_parent_also_ended_is_taken_as_reaped_up_the_chain() -> None:
    account = TreeAccount(ROOT)
    account.update(snap(p(ROOT, 1, 1.0), p(101, ROOT, 1.0), p(102, 101, 1.0)), unmarked)
    assert account.update(snap(p(ROOT, 1, 3.0)), unmarked) == pytest.approx(3.0)


def test_a_marked_orphan_and_its_children_count_and_its_end_keeps_its_last_reading() -> None:
    account = TreeAccount(ROOT)
    marked = {500}

    def mark(proc: Proc) -> bool:
        return proc.pid in marked

    # A server daemonized away from the root (parent init) with a child of its own.
    assert account.update(snap(p(ROOT, 1, 1.0), p(500, 1, 2.0), p(501, 500, 0.5)), mark) == pytest.approx(3.5)
    # init reaps it when it ends: nothing in the tree absorbs it, so its last reading stays.
    assert account.update(snap(p(ROOT, 1, 1.0)), mark) == pytest.approx(3.5)


def test_a_process_of_the_tree_stays_counted_when_orphaned() -> None:
    account = TreeAccount(ROOT)
    account.update(snap(p(ROOT, 1, 1.0), p(101, ROOT, 0.5), p(102, 101, 1.0)), unmarked)
    # 101 ended (the root reaped it); 102, unmarked, was reparented to init and keeps running.
    assert account.update(snap(p(ROOT, 1, 1.5), p(102, 1, 2.0)), unmarked) == pytest.approx(3.5)


PROBE = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from harness.cpu_meter import start_meter

    flag, life = Path(sys.argv[1]), sys.argv[2]
    meter = start_meter("probe")
    before = meter.read()
    burner = (
        "import os, sys, time\\n"
        "t = time.process_time()\\n"
        "while time.process_time() - t < 0.5: pass\\n"
        "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\\n"
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\\n"
        "time.sleep(float(sys.argv[2]))\\n"
    )
    # The burner spends 0.5 CPU-s, the tests ask for 0.3: /proc counts whole clock ticks, and an exact
    # 0.3 s by process_time() once read as 0.29999999999999993 there (CI). Without the orphan it reads ~0.
    # A shell that starts the burner in the background and exits: the burner is an orphan (init's child).
    background = '"$0" -c "$1" "$2" "$3" >/dev/null 2>&1 &'
    subprocess.run(["sh", "-c", background, sys.executable, burner, str(flag), life], check=True)
    while not flag.exists():
        time.sleep(0.01)
    time.sleep(0.2 if life == "0" else 0)  # ended, or still alive, when read
    print(meter.method, meter.read() - before)
    meter.close()
    """
)


def _probe(tmp_path: Path, life: str, method: str | None) -> tuple[str, float, int]:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    env.pop(METHOD_ENV, None)
    if method:
        env[METHOD_ENV] = method
    flag = tmp_path / "burned"
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(flag), life],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    )  # fmt: skip
    used, seconds = run.stdout.split()
    return used, float(seconds), int(flag.read_text())


def test_the_cgroup_meter_counts_an_orphan_that_already_ended(tmp_path: Path) -> None:
    used, seconds, _ = _probe(tmp_path, life="0", method=None)
    if used != "cgroup":
        pytest.skip("no writable cgroup2 group here: scripts/test --profile falls back to /proc")
    assert seconds >= 0.3


def test_the_proc_meter_counts_a_live_orphan_by_its_mark(tmp_path: Path) -> None:
    used, seconds, burner = _probe(tmp_path, life="30", method="proc")
    try:
        assert used == "proc"
        assert seconds >= 0.3
    finally:
        os.kill(burner, signal.SIGKILL)
