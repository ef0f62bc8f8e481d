"""pytest plugin of `scripts/test --profile` (loaded with `-p tests.cpu_profile`; inert unless
$TRAINSTACK_TEST_PROFILE_DIR names a directory).

Each pytest process that runs tests (an xdist worker, or a pytest without workers) starts a meter of its
whole process tree (harness/cpu_meter.py) before collecting, reads it when the first test of another file
starts and when the session ends, and appends one JSON line per stretch to `<dir>/<worker>-<pid>.jsonl`
(harness/cpu_profile.py sums them). A stretch runs from its file's first test to the next file's first
test, so a file pays for its module fixtures' teardown, and the file that first asks for a session fixture
(a worker's local RunPod, moto) pays for its start; the last file of a process also pays for the session's
teardown and pytest's report. The xdist controller runs no test and records only its own CPU.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import IO

import pytest

from harness.cpu_meter import Meter, start_meter
from harness.cpu_profile import CONTROLLER, STARTUP, Segment

PROFILE_DIR_ENV = "TRAINSTACK_TEST_PROFILE_DIR"


class _Profiler:
    def __init__(self, out: Path, worker: str) -> None:
        self.out, self.worker = out, worker
        self.meter: Meter | None = None
        self.records: IO[str] | None = None
        self.controller = False
        self.file, self.tests = STARTUP, 0
        self.cpu_s, self.wall_s = 0.0, time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.records = open(self.out / f"{self.worker}-{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115
        # xdist's controller (registered in its pytest_configure) hands tests to workers and runs none.
        self.controller = self.worker == "main" and session.config.pluginmanager.hasplugin("dsession")
        if not self.controller:
            self.meter = start_meter(self.worker)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        file = item.nodeid.split("::", 1)[0]
        if file != self.file:
            self._record()
            self.file = file
        self.tests += 1

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """After the session's teardown and its report, the last thing pytest does before it exits."""
        if self.controller:
            own = resource.getrusage(resource.RUSAGE_SELF)  # not its children: they are the workers
            self._write(CONTROLLER, own.ru_utime + own.ru_stime, "rusage")
        elif self.meter is not None:
            self._record()
            self.meter.close()
        if self.records is not None:
            self.records.close()

    def _record(self) -> None:
        assert self.meter is not None
        cpu_s = self.meter.read()
        self._write(self.file, cpu_s - self.cpu_s, self.meter.method)
        self.cpu_s, self.wall_s, self.tests = cpu_s, time.monotonic(), 0

    def _write(self, file: str, cpu_s: float, method: str) -> None:
        wall_s = time.monotonic() - self.wall_s
        segment = Segment(file, round(cpu_s, 3), round(wall_s, 3), self.tests, self.worker, method)
        assert self.records is not None
        self.records.write(segment.to_json() + "\n")


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get(PROFILE_DIR_ENV)
    if out:
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        config.pluginmanager.register(_Profiler(Path(out), worker), "trainstack-cpu-profile")
