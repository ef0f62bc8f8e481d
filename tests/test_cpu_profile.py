"""tests/cpu_profile.py, the plugin of `scripts/test --profile`: a run on xdist workers leaves one record per
stretch of a file, with the CPU of the processes the file's tests started, and the controller's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.cpu_profile import CONTROLLER, STARTUP, merge, read_segments
from tests.cpu_profile import PROFILE_DIR_ENV
from tests.polling import scaled

REPO = Path(__file__).resolve().parents[1]

CASES = {
    # A child that burns 0.4 s of its own CPU (however long that takes on a busy machine).
    "test_burns.py": (
        "import subprocess, sys\n\n"
        "BURN = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass'\n\n"
        "def test_child_burns():\n    subprocess.run([sys.executable, '-c', BURN], check=True)\n"
    ),
    "test_idle.py": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
}


def test_each_file_is_charged_the_cpu_of_what_its_tests_started(tmp_path: Path) -> None:
    for name, text in CASES.items():
        (tmp_path / name).write_text(text)
    records = tmp_path / "records"
    # Only the plugins it needs: the venv's others cost each pytest process ~2 s of imports.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "tests.cpu_profile", "-q",
         "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "--rootdir", str(tmp_path),
         "-c", os.devnull, str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=scaled(120),
        env=os.environ | {"PYTHONPATH": str(REPO), PROFILE_DIR_ENV: str(records),
                          "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    segments, bad = read_segments(records)
    assert bad == 0
    rows = {row.file: row for row in merge(segments)}
    assert set(rows) == {"test_burns.py", "test_idle.py", STARTUP, CONTROLLER}
    assert (rows["test_burns.py"].tests, rows["test_idle.py"].tests) == (1, 2)
    assert rows["test_burns.py"].segments == rows["test_idle.py"].segments == 1  # loadfile: one worker each
    assert rows["test_burns.py"].cpu_s >= 0.4
    assert rows["test_idle.py"].cpu_s < 0.4
    assert rows[STARTUP].segments == 2 and rows[STARTUP].cpu_s > 0  # each worker's start and collection
    assert {seg.worker for seg in segments if seg.file == CONTROLLER} == {"main"}
