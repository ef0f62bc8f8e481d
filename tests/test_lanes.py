"""The test lanes stay honest: scripts/test's fast lane leaves out every heavy marker, tests/conftest.py
fails a fast-lane test that starts the CLI or a server (even one that swallows the error), and
`scripts/test --help` prints its usage without setting anything up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import lanes
from tests.conftest import HEAVY, heavy_command
from tests.polling import scaled

REPO = Path(__file__).resolve().parents[1]


def test_the_fast_lane_leaves_out_every_heavy_marker() -> None:
    assert sorted(re.findall(r"not (\w+)", lanes.FAST)) == sorted(HEAVY)
    # the full run: both lanes, every test
    assert lanes.PARALLEL[-2:] == ("-m", "not serial") and lanes.SERIAL[-2:] == ("-m", "serial")
    # The heaviest-first order of tests/conftest.py reaches the workers only without xdist's own reorder.
    assert " ".join(lanes.PARALLEL).startswith("--dist loadfile --no-loadscope-reorder")


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["pulumi", "up", "--yes"], "the pulumi CLI"),
        ([Path("/opt/bin/pulumi"), "preview"], "the pulumi CLI"),
        ([sys.executable, "-m", "emulator", "serve", "--port", "0"], "python -m emulator"),
        ([sys.executable, "-m", "train.node.agent", "--port", "1"], "python -m train.node.agent"),
        ([sys.executable, "-c", "from moto.server import main\nmain()", "-p", "1"], "a moto server"),
        (f"{REPO}/scripts/local-runpod start", "scripts/local-runpod"),
        (["ip", "netns", "add", "x"], "ip (namespaces)"),
        (["bash", "-n", "start-node-0.sh"], None),
        ([sys.executable, "-m", "train.node.healthgate", "--help"], None),
        (["shellcheck", "up"], None),
    ],
)
def test_heavy_commands_are_recognised(argv: object, what: str | None) -> None:
    assert heavy_command(argv) == what


CASES = """
import subprocess
import pytest

def test_unmarked_starts_the_cli():
    try:
        subprocess.Popen(["pulumi", "version"])
    except BaseException:
        pass  # code under test that swallows errors does not hide the start

@pytest.mark.services
def test_marked_may_start_a_namespace_tool():
    subprocess.run(["ip", "-V"], check=True, capture_output=True)

def test_unmarked_runs_a_plain_process():
    subprocess.run(["true"], check=True)
"""


def test_a_fast_lane_test_that_starts_the_cli_fails(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-p", "no:cacheprovider",
         "-p", "no:schemathesis", "-p", "no:anyio", "--rootdir", str(tmp_path), "-c", os.devnull,
         str(tmp_path / "test_cases.py")],
        cwd=REPO, capture_output=True, text=True, timeout=scaled(120),
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert "1 failed, 2 passed" in out, out
    assert "test_unmarked_starts_the_cli started the pulumi CLI without a lane marker" in out, out


@pytest.mark.parametrize("flag", ["--help", "-h", "--fast --help"])
def test_help_prints_usage_and_sets_nothing_up(
    flag: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"--help started {args}")  # bootstrap, check or pytest

    monkeypatch.setattr(lanes.subprocess, "run", refuse)
    with pytest.raises(SystemExit) as done:
        lanes.main(flag.split())
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: scripts/test [--fast] [--profile]"), out
    assert "--fast" in out and "serial" in out
    assert "--profile" in out and "CI=true" in out


ORDER_CASES = {
    "test_a_unit.py": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
    "test_b_services.py": "import pytest\npytestmark = pytest.mark.services\n\ndef test_one():\n    pass\n",
    "test_c_mixed.py": (
        "import pytest\n\ndef test_unit():\n    pass\n\n@pytest.mark.root\ndef test_hosts():\n    pass\n"
    ),
    "test_d_e2e.py": "import pytest\npytestmark = pytest.mark.e2e\n\ndef test_one():\n    pass\n",
}


def test_the_heaviest_files_are_collected_first_and_stay_whole(tmp_path: Path) -> None:
    for name, text in ORDER_CASES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n  e2e: x\n  services: x\n  root: x\n  slow: x\n  serial: x\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "--collect-only",
         "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:anyio", "--rootdir", str(tmp_path),
         "-c", str(tmp_path / "pytest.ini"),
         str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=scaled(120),
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    ids = [line.rsplit("/", 1)[-1] for line in run.stdout.splitlines() if "::" in line]
    # root (a whole file, its unit test too), then e2e, then services, then the unit file, each as collected.
    assert ids == [
        "test_c_mixed.py::test_unit",
        "test_c_mixed.py::test_hosts",
        "test_d_e2e.py::test_one",
        "test_b_services.py::test_one",
        "test_a_unit.py::test_one",
        "test_a_unit.py::test_two",
    ], run.stdout + run.stderr


def test_the_lanes_let_pytest_keep_its_rewritten_test_modules(tmp_path: Path) -> None:
    """PYTHONDONTWRITEBYTECODE (set on CI machines) made every pytest process rewrite the asserts of every
    test module again (issue #47); the lanes run without it, so a later process reads pytest's cached
    rewrite from __pycache__, and the rest of the environment is passed as it was."""
    env = lanes.lane_environment({"PYTHONDONTWRITEBYTECODE": "1", "PATH": os.environ["PATH"], "X": "y"})
    assert env == {"PATH": os.environ["PATH"], "X": "y"}
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list((tmp_path / "__pycache__").glob("test_one.*-pytest-*.pyc")), done.stdout


# A stand-in for .venv/bin/pytest: the lane it runs (`-m serial` or not) says it started, then waits for the
# other lane's word, so it ends only if both lanes run at once; its exit code is $CODE_<lane>.
FAKE_PYTEST = """#!/usr/bin/env bash
if [[ " $* " == *" -m serial "* ]]; then me=serial other=parallel; else me=parallel other=serial; fi
touch "$LANES_DIR/$me"
for _ in $(seq 400); do
  code="CODE_$me"
  if [[ -e "$LANES_DIR/$other" ]]; then echo "$me lane: saw the $other lane"; exit "${!code}"; fi
  sleep 0.05
done
echo "$me lane: ran alone"; exit 9
"""


@pytest.mark.parametrize(("serial_code", "result"), [(0, 0), (1, 1)])
def test_the_serial_lane_runs_beside_the_parallel_one_and_its_output_follows(
    serial_code: int, result: int, tmp_path: Path, capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake = tmp_path / ".venv/bin/pytest"
    fake.parent.mkdir(parents=True)
    fake.write_text(FAKE_PYTEST)
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "REPO", tmp_path)
    env = {"PATH": os.environ["PATH"], "LANES_DIR": str(tmp_path), "CODE_parallel": "0"}
    codes = lanes.side_by_side(["-n", "2", *lanes.PARALLEL], list(lanes.SERIAL), env | {
        "CODE_serial": str(serial_code)})  # fmt: skip
    assert codes == [0, serial_code] and lanes.finish(codes) == result
    out = capfd.readouterr().out
    # The parallel lane's output as it comes, then the serial lane's, whole, from its log.
    assert out.index("parallel lane: saw the serial lane") < out.index("serial lane: saw the parallel lane")
    assert f"== tests: serial lane (beside the parallel lane): exit {serial_code}" in out
    (log,) = (tmp_path / ".state/test-lanes").glob("serial-*.log")
    assert log.read_text() == "serial lane: saw the parallel lane\n"


def test_an_interrupted_parallel_lane_ends_the_serial_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / ".venv/bin/pytest"
    fake.parent.mkdir(parents=True)
    fake.write_text(FAKE_PYTEST)
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "REPO", tmp_path)
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(lanes, "lane", interrupted)
    env = {"PATH": os.environ["PATH"], "LANES_DIR": str(tmp_path), "CODE_serial": "0"}
    with pytest.raises(KeyboardInterrupt):
        lanes.side_by_side(["-n", "2", *lanes.PARALLEL], list(lanes.SERIAL), env)
    (serial,) = started
    assert serial.returncode == -15  # terminated, not left to wait out its 20 s for the other lane


@pytest.mark.parametrize(
    ("fast", "env", "expected"),
    [
        (False, {}, "3"),  # the full suite on 2 cores: a third worker for the time its files wait
        (True, {}, "auto"),  # unit tests: CPU-bound, one a core
        (False, {"TRAINSTACK_TEST_WORKERS": "2"}, "2"),  # the user's choice wins
        (True, {"TRAINSTACK_TEST_WORKERS": "4"}, "4"),
    ],
)
def test_the_parallel_lane_has_a_worker_more_than_the_cores_unless_told(
    fast: bool, env: dict[str, str], expected: str
) -> None:
    assert lanes.parallel_workers(fast, env, cores=2) == expected
