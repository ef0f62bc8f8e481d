"""scripts/bootstrap's package bytecode (issue #47): the first checkout of a lock compiles .venv/lib and keeps
the .pyc files in the cache; the next checkout links them in instead of compiling, and compiles only a file
whose source has another mtime than the one the kept .pyc was made from.

The two functions are run as they are in the script, on a small `.venv/lib` whose package files are hard
links to one "uv cache" file, as uv installs them (so a second checkout's sources have the first's mtimes)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TAG = sys.implementation.cache_tag


def _function(text: str, name: str) -> str:
    start = text.index(f"{name}() {{")
    return text[start : text.index("\n}\n", start) + 3]


def _checkout(tmp: Path, name: str, uv_cache: Path, own: dict[str, str]) -> Path:
    """A checkout whose .venv/lib/pkg has uv's files linked in and `own` files written fresh."""
    lib = tmp / name / ".venv/lib/pkg"
    lib.mkdir(parents=True)
    for source in uv_cache.iterdir():
        os.link(source, lib / source.name)
    for file, text in own.items():
        (lib / file).write_text(text)
    (tmp / name / ".venv/bin").mkdir()
    (tmp / name / ".venv/bin/python").symlink_to(sys.executable)
    (tmp / name / ".venv/.trainstack-req").write_text("lock1\n")
    return tmp / name


def _bootstrap(checkout: Path, cache: Path, call: str, no_links: bool = False) -> None:
    text = (REPO / "scripts/bootstrap").read_text()
    # no_links: the cache on another file system, where `cp -l` fails (EXDEV), as a cp that refuses it
    refuse = 'cp() { [[ " $* " == *" -al "* || " $* " == *" -l "* ]] && return 1; command cp "$@"; }'
    script = "\n".join(
        [
            "set -euo pipefail",
            refuse if no_links else "",
            f"cache={cache}",
            f"root={checkout / 'project'}",  # the project's own sources: none here
            _function(text, "compile_bytecode"),
            _function(text, "keep_bytecode"),
            f"cd {checkout}",
            call,
        ]
    )
    (checkout / "project").mkdir(exist_ok=True)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def _pyc(checkout: Path, module: str) -> Path:
    return checkout / f".venv/lib/pkg/__pycache__/{module}.{TAG}.pyc"


def _source_size(pyc: Path) -> int:
    return struct.unpack("<I", pyc.read_bytes()[12:16])[0]  # PEP 552 header: flags, mtime, size


def test_a_second_checkout_links_the_kept_bytecode_and_compiles_only_what_differs(tmp_path: Path) -> None:
    uv_cache = tmp_path / "uv-cache"
    uv_cache.mkdir()
    (uv_cache / "shared.py").write_text("VALUE = 1\n")
    cache = tmp_path / "cache"
    first = _checkout(tmp_path, "first", uv_cache, {"mine.py": "A = 1\n"})
    _bootstrap(first, cache, "compile_bytecode")

    store = cache / "venv-bytecode" / f"lock1-{TAG}"
    kept = store / f"pkg/__pycache__/shared.{TAG}.pyc"
    assert kept.is_file() and kept.stat().st_ino == _pyc(first, "shared").stat().st_ino  # linked, not copied
    assert (first / ".venv/.trainstack-bytecode").read_text().strip() == "lock1"

    # The second checkout's own file has other content and another mtime than the first's of that name.
    second = _checkout(tmp_path, "second", uv_cache, {"mine.py": "A = 1  # changed\n"})
    os.utime(second / ".venv/lib/pkg/mine.py", (1e9, 1e9))  # written in another second
    _bootstrap(second, cache, "compile_bytecode")
    assert _pyc(second, "shared").stat().st_ino == kept.stat().st_ino  # linked from the cache: not compiled
    mine = _pyc(second, "mine")
    assert mine.stat().st_ino != (store / f"pkg/__pycache__/mine.{TAG}.pyc").stat().st_ino  # compiled anew
    assert _source_size(mine) == (second / ".venv/lib/pkg/mine.py").stat().st_size
    assert (second / ".venv/.trainstack-bytecode").read_text().strip() == "lock1"


def test_the_four_stores_used_last_are_kept(tmp_path: Path) -> None:
    uv_cache = tmp_path / "uv-cache"
    uv_cache.mkdir()
    (uv_cache / "shared.py").write_text("VALUE = 1\n")
    cache = tmp_path / "cache"
    stores = cache / "venv-bytecode"
    for age, lock in enumerate(["old1", "old2", "old3", "old4", "old5"]):
        (stores / f"{lock}-{TAG}").mkdir(parents=True)
        os.utime(stores / f"{lock}-{TAG}", (1e9 - age * 100, 1e9 - age * 100))  # old1 is the newest of them
    checkout = _checkout(tmp_path, "c", uv_cache, {})
    _bootstrap(checkout, cache, "compile_bytecode")
    kept = ("lock1", "old1", "old2", "old3")  # the new store and the three used last
    assert sorted(p.name for p in stores.iterdir()) == [f"{n}-{TAG}" for n in kept]


def test_without_hard_links_the_kept_bytecode_is_copied_in_not_compiled(tmp_path: Path) -> None:
    uv_cache = tmp_path / "uv-cache"
    uv_cache.mkdir()
    (uv_cache / "shared.py").write_text("VALUE = 1\n")
    cache = tmp_path / "cache"
    _bootstrap(_checkout(tmp_path, "first", uv_cache, {}), cache, "compile_bytecode", no_links=True)
    kept = cache / "venv-bytecode" / f"lock1-{TAG}" / f"pkg/__pycache__/shared.{TAG}.pyc"
    os.utime(kept, (1e9, 1e9))  # a copy keeps this mtime; a compile would write now
    second = _checkout(tmp_path, "second", uv_cache, {})
    _bootstrap(second, cache, "compile_bytecode", no_links=True)
    pyc = _pyc(second, "shared")
    assert pyc.stat().st_ino != kept.stat().st_ino and pyc.stat().st_mtime == 1e9
    assert pyc.read_bytes() == kept.read_bytes()
