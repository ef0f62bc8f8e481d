"""Re-delivery stops the node's previous start script before it starts the new one.

The provider's own remote shell (`_INSTALL`, sent by `deliver()`) runs here, locally: ssh's command goes to
a local bash, scp to a directory copy. The start scripts are real detached processes; every wait is on a file
they write or on a pid, with a deadline (tests/polling.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from providers.delivery import node_files
from providers.delivery.node_files import NodeFilesSpec, deliver
from providers.delivery.ssh import Ssh, SshTarget
from tests.polling import poll

POD = "podlocal0"
SCRIPT = "start-node-0.sh"

# Generation GEN of a start script: records whether the previous one still runs when it starts, then waits on
# a child until TERM (which it honours, as the real script does, unless IGNORE_TERM).
_FAKE = r"""#!/usr/bin/env bash
set -u
gen=GEN
if [[ -f run.pid ]]; then
  old=$(cat run.pid)
  state=$(ps -o stat= -p "$old" 2>/dev/null || true)
  if [[ -n $state && $state != Z* ]]; then echo "$old $state" >>overlap; fi
fi
echo $$ >run.pid
child=""
if IGNORE_TERM; then trap '' TERM; else trap 'echo $$ >>stopped; kill "$child"; exit 143' TERM; fi
sleep infinity &
child=$!
echo $child >"child.$gen"
echo "$gen $$" >>started
wait "$child"
"""


class LocalNode:
    """A Runner that is the node: ssh's command runs in a local bash, scp copies a directory."""

    def __init__(self) -> None:
        self.env = os.environ | {"RUNPOD_POD_ID": POD}

    def __call__(
        self, argv: Sequence[str], stdin: bytes | None, timeout: float
    ) -> subprocess.CompletedProcess[bytes]:
        if argv[0] == "scp":
            local, remote = argv[-2], argv[-1].split(":", 1)[1]
            shutil.copytree(local, remote)
            return subprocess.CompletedProcess(list(argv), 0, b"", b"")
        assert argv[0] == "ssh"
        return subprocess.run(
            ["bash", "-c", argv[-1]],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )


def _args(tmp_path: Path, gen: int, ignore_term: bool = False) -> NodeFilesSpec:
    script = _FAKE.replace("GEN", str(gen)).replace("IGNORE_TERM", "true" if ignore_term else "false")
    return NodeFilesSpec.model_validate(
        {
            "host": "127.0.0.1",
            "pod_id": POD,
            "rank": 0,
            "remote_dir": str(tmp_path / "workspace"),
            "files": {"hostfile": "127.0.0.1 slots=1\n", SCRIPT: script},
            "start_script": SCRIPT,
            "known_hosts": str(tmp_path / "known_hosts"),
        }
    )


def _alive(pid: int) -> bool:
    """Running (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "workspace"
    yield work
    # Every start script the test started (also one a failing re-delivery left running): its whole group
    # (each is a session leader).
    started, pidfile = work / "started", work / ".run" / f"{POD}.pid"
    pids = [line.split()[1] for line in started.read_text().splitlines()] if started.is_file() else []
    pids += [pidfile.read_text()] if pidfile.is_file() else []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.killpg(int(pid), signal.SIGKILL)


def _started(work: Path, gen: int) -> int:
    def check() -> int | None:
        for line in (work / "started").read_text().splitlines() if (work / "started").is_file() else []:
            g, pid = line.split()
            if int(g) == gen:
                return int(pid)
        return None

    log = work / "logs" / f"start-node-0.{POD}.log"
    return poll(
        check, f"start script generation {gen}", 30, 0.05, lambda: log.read_text() if log.is_file() else ""
    )


def _ssh(a: NodeFilesSpec) -> Ssh:
    return Ssh(SshTarget(a.host, a.port, a.user, a.pod_id, Path(a.known_hosts)), runner=LocalNode())


@pytest.mark.skipif(not Path("/proc/self/ns/net").exists(), reason="needs Linux /proc")
def test_redelivery_terms_the_previous_start_script_before_the_new_one_starts(
    tmp_path: Path, workdir: Path
) -> None:
    first = _args(tmp_path, 1)
    assert deliver(first, _ssh(first)).startswith(f"started {SCRIPT} as pid ")
    old = _started(workdir, 1)
    old_child = int((workdir / "child.1").read_text())
    assert _alive(old)

    second = _args(tmp_path, 2)  # the start script changed: an update re-delivers
    deliver(second, _ssh(second))
    # deliver() returns only after the old script has gone: it got the TERM (its trap ran) and exited.
    assert (workdir / "stopped").read_text().split() == [str(old)]
    assert not _alive(old)
    poll(lambda: not _alive(old_child), "the old script's child gone", 10, 0.05)
    new = _started(workdir, 2)
    assert new != old and _alive(new)
    assert not (workdir / "overlap").exists(), (workdir / "overlap").read_text()
    assert (workdir / SCRIPT).read_text().startswith(_FAKE.replace("GEN", "2")[:40])


@pytest.mark.skipif(not Path("/proc/self/ns/net").exists(), reason="needs Linux /proc")
def test_a_script_that_ignores_term_is_killed_with_its_group_after_the_grace(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node_files, "STOP_GRACE_S", 1)
    first = _args(tmp_path, 1, ignore_term=True)
    deliver(first, _ssh(first))
    old = _started(workdir, 1)
    old_child = int((workdir / "child.1").read_text())

    second = _args(tmp_path, 2)
    deliver(second, _ssh(second))
    # SIGKILL to the old script's process group: the script and its child are gone before the new start.
    assert not _alive(old)
    poll(lambda: not _alive(old_child), "the old script's child killed with its group", 10, 0.05)
    assert not (workdir / "stopped").exists()
    _started(workdir, 2)
    assert not (workdir / "overlap").exists(), (workdir / "overlap").read_text()
