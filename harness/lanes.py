"""`scripts/test` (`trainstack test`): set everything up, then the static checks and the suite's lanes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from common import pulumi

REPO = Path(__file__).resolve().parents[1]
# The fast lane leaves out every heavy marker (tests/conftest.py's HEAVY; tests/test_lanes.py holds it).
FAST = "not e2e and not services and not root and not slow"
# --dist loadfile: a file's tests stay on one worker, so its module fixtures (a local RunPod) start once.
# --no-loadscope-reorder: files go out heaviest first, in tests/conftest.py's order, not xdist's own.
# --durations: the slowest tests of each lane in every CI log, where the suite's time goes.
PARALLEL = ("--dist", "loadfile", "--no-loadscope-reorder", "--durations=25", "-m", "not serial")
SERIAL = ("--durations=25", "-m", "serial")
NO_TESTS = 5  # pytest's "no tests collected"

DESCRIPTION = """\
Set up everything (scripts/bootstrap), then run every check: static checks and the whole pytest suite,
including the end-to-end runs of the real Pulumi CLI against the local RunPod. Extra args go to pytest.

  (no option)  everything, as CI runs it (.ci/run): scripts/bootstrap, scripts/check, then the suite in two
               lanes side by side: the parallel lane (every test not marked `serial`, on
               $TRAINSTACK_TEST_WORKERS pytest-xdist workers, default: one per core and one more, as
               its files wait on servers and timers half their time) and, beside it, the
               serial lane (`serial`: the tests that must not run beside each other, each a cluster of
               emulated hosts or a restart of the servers), one at a time; its output is printed when
               both lanes are done (it is written to .state/test-lanes/ meanwhile).

Extra args go to pytest in every lane it runs (paths, -k, -x; a -m of yours replaces the lane's), e.g.
  scripts/test --fast tests/policy              the unit tests of one package
  scripts/test tests/e2e/test_protect.py        one file, whatever its lane
  .venv/bin/pytest -n 2 -m services             one marker's tests (after a bootstrap and . scripts/env.sh)
Markers (pyproject.toml): e2e (the real pulumi CLI), services (a local RunPod, moto, agents), root
(network namespaces), slow (a real training job), serial (cannot share the machine). tests/conftest.py
fails a test that starts the CLI or a server without the marker that says so."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/test", usage="scripts/test [--fast] [--profile] [--in-turn] [pytest args...]",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )  # fmt: skip
    p.add_argument(
        "--fast", action="store_true", help="the unit lane only: no Pulumi CLI, no servers, no network "
        "namespaces (no test marked e2e, services, root or slow), in parallel; no static checks",
    )  # fmt: skip
    p.add_argument(
        "--in-turn", action="store_true", help="run the serial lane after the parallel lane, not beside it: "
        "about 31 minutes for a full run where side by side took 16, at ~3.5 %% less CPU "
        "(docs/PERFORMANCE.md has the runs)",
    )  # fmt: skip
    p.add_argument(
        "--profile", action="store_true", help="also measure the CPU-seconds of each test file, its whole "
        "process tree, and print the suite's total and the ten costliest files beside the previous profiled "
        "run's (harness/cpu_profile.py; docs/PERFORMANCE.md); on by default when CI=true; the exit code "
        "stays the tests'",
    )  # fmt: skip
    return p


def lane_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The lanes' environment: `env` without PYTHONDONTWRITEBYTECODE. With it set, pytest keeps no rewritten
    test module in __pycache__, so every pytest process (each xdist worker, the serial lane) rewrote the
    asserts of all ~300 test modules again: 8.6 CPU-s to collect the suite against 3.7 from the cache
    (issue #47). The packages' and the project's own bytecode is compiled by scripts/bootstrap either way."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def lane(name: str, args: Sequence[str], env: Mapping[str, str]) -> int:
    print(f"== tests: {name} lane", flush=True)
    started = time.monotonic()
    code = subprocess.run(
        [str(REPO / ".venv/bin/pytest"), *args], cwd=REPO, env=dict(env), check=False
    ).returncode
    print(f"== tests: {name} lane: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code


def side_by_side(parallel: Sequence[str], serial: Sequence[str], env: Mapping[str, str]) -> list[int]:
    """The serial lane in a process of its own beside the parallel lane, its output kept in a file and
    printed after. One lane after the other left a core idle most of the time: each of the serial lane's
    tests waits on its emulated hosts far more than it computes (issue #47: 1,786 CPU-s in 31 min)."""
    logs = REPO / ".state/test-lanes"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"serial-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.log"
    print(f"== tests: serial lane, beside the parallel lane (its output: {log}, printed when both end)")
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(REPO / ".venv/bin/pytest"), *serial], cwd=REPO, env=dict(env), stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            first = lane("parallel", parallel, env)
        except BaseException:  # interrupted, or the parallel lane could not start: the serial lane ends too
            process.terminate()
            process.wait()
            raise
        second = process.wait()
    ended = time.monotonic() - started
    print(f"== tests: serial lane (beside the parallel lane): exit {second} in {ended:.0f} s", flush=True)
    sys.stdout.write(log.read_text())
    sys.stdout.flush()
    return [first, second]


def finish(codes: Sequence[int]) -> int:
    """pytest's "no tests collected" fails the run only when no lane ran anything: a suite that runs nothing
    proves nothing, but `scripts/test tests/policy` has no serial test to run."""
    failed = [c for c in codes if c not in (0, NO_TESTS)]
    if failed:
        return failed[-1]
    if 0 not in codes:
        print("scripts/test: pytest collected no tests", file=sys.stderr)
        return 1
    return 0


def parallel_workers(fast: bool, env: Mapping[str, str], cores: int | None = None) -> str:
    """pytest-xdist's -n for the lane that runs in parallel: $TRAINSTACK_TEST_WORKERS when set; else one a
    core for --fast (unit tests, CPU-bound), and one more than the cores for the full suite, whose e2e and
    cluster files spend about half their time waiting on servers, timers and emulated hosts (a profiled
    fresh-clone run on 2 cores: 1,015 CPU-s in 2,102 s of its files' wall, docs/PERFORMANCE.md); a third
    worker fills that wait."""
    if chosen := env.get("TRAINSTACK_TEST_WORKERS"):
        return chosen
    if fast:
        return "auto"
    return str((cores or os.cpu_count() or 1) + 1)


def main(argv: Sequence[str]) -> int:
    options, args = parser().parse_known_args(argv)
    profile = options.profile or os.environ.get("CI") == "true"
    workers = parallel_workers(options.fast, os.environ)
    # --with-torch: the local-cluster tests (tests/hosts) run real torchrun nodes; cached after the first run.
    bootstrap = [str(REPO / "scripts/bootstrap"), "--quiet", *([] if options.fast else ["--with-torch"])]
    if (code := subprocess.run(bootstrap, check=False).returncode) != 0:
        return code
    env = lane_environment(pulumi.environment())
    profiling: list[str] = []
    if profile:  # each pytest process records its files' CPU under the run's folder (tests/cpu_profile.py)
        folder = (
            REPO / ".state/test-profile" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        )
        folder.mkdir(parents=True)
        env["TRAINSTACK_TEST_PROFILE_DIR"] = str(folder)
        profiling = ["-p", "tests.cpu_profile"]
    if options.fast:
        codes = [lane("fast", ["-n", workers, "-m", FAST, *profiling, *args], env)]
    else:
        print("== static checks", flush=True)
        if (code := subprocess.run([str(REPO / "scripts/check")], check=False).returncode) != 0:
            return code
        parallel, serial = ["-n", workers, *PARALLEL, *profiling, *args], [*SERIAL, *profiling, *args]
        if options.in_turn:
            codes = [lane("parallel", parallel, env), lane("serial", serial, env)]
        else:
            codes = side_by_side(parallel, serial, env)
    if profile:  # a report that fails says so and leaves the exit code to the tests
        selection = ("fast" if options.fast else "full") + (f" {' '.join(args)}" if args else "")
        report = [
            str(REPO / ".venv/bin/python"),
            "-m",
            "harness.cpu_profile",
            env["TRAINSTACK_TEST_PROFILE_DIR"],
        ]
        if subprocess.run([*report, "--selection", selection], env=env, check=False).returncode != 0:
            print(
                "scripts/test: no CPU profile to report (see above); the exit code is the tests'",
                file=sys.stderr,
            )
    return finish(codes)
