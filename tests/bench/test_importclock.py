"""bench/importclock.py: each module is charged its own import's CPU, not that of the imports it starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.pulumi_cli import REPO

# A package whose body only imports its child, and a child that burns CPU: the child's seconds must land on
# the child, not on the package (which `-X importtime`'s cumulative column would give it).
PACKAGE = "import clockpkg.child\n"
CHILD = "n = 0\nfor i in range(2_000_000):\n    n += i\n"
PROBE = """
import json, sys
import bench.importclock as clock
clock.install()
clock.install()  # idempotent: a second install does not charge every import twice
import clockpkg
print(json.dumps({k: v for k, v in clock.SELF_CPU.items() if k.startswith("clockpkg")}))
"""


def test_nested_imports_are_charged_to_themselves(tmp_path: Path) -> None:
    (tmp_path / "clockpkg").mkdir()
    (tmp_path / "clockpkg" / "__init__.py").write_text(PACKAGE)
    (tmp_path / "clockpkg" / "child.py").write_text(CHILD)
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={"PYTHONPATH": f"{REPO}:{tmp_path}", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    charged = json.loads(out.stdout)
    assert set(charged) == {"clockpkg", "clockpkg.child"}
    assert charged["clockpkg.child"] > 0
    # The package's own body is one import statement; the loop's CPU is its child's.
    assert charged["clockpkg"] < charged["clockpkg.child"] / 4
