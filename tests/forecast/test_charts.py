"""`scripts/forecast --png` (forecast/chart.py): the comparison as run cost against hours, the memory per
GPU as a bar of its parts; files checked for what they are, not by eye (issue #68: everything was a table).
Without matplotlib the tables still print and one line says how to get it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from forecast.cli import EXIT_BAD_INPUT, EXIT_FITS, main

PNG = b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(PNG)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")  # IHDR width, height


def test_compare_and_memory_pictures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod", "--compare", "--png", str(tmp_path / "compare.png")]) == EXIT_FITS
    width, height = _png(tmp_path / "compare.png")
    assert (width, height) == (990, 660) and (tmp_path / "compare.png").stat().st_size > 20_000
    assert main(["dev", "--png", str(tmp_path / "memory.png")]) == EXIT_FITS
    assert _png(tmp_path / "memory.png")[0] == 990
    err = capsys.readouterr().err
    assert f"drew {tmp_path / 'compare.png'}" in err and f"drew {tmp_path / 'memory.png'}" in err


def test_without_matplotlib_the_tables_print_and_one_line_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert main(["dev", "--png", str(tmp_path / "m.png")]) == EXIT_BAD_INPUT
    out = capsys.readouterr()
    assert "Money" in out.out  # the forecast itself was printed first
    assert "--png needs matplotlib" in out.err and "uv sync --group test" in out.err
    assert not (tmp_path / "m.png").exists()
