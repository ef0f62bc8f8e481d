"""The cache folder rule shared with scripts/bootstrap and scripts/env.sh."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cachedir import cache_dir


def test_trainstack_cache_wins_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINSTACK_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == tmp_path / "home" / ".cache" / "trainstack"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "trainstack"
    monkeypatch.setenv("TRAINSTACK_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
