"""trainstack's per-user cache folder, the same rule scripts/bootstrap and scripts/env.sh follow:
`$TRAINSTACK_CACHE`, else `$XDG_CACHE_HOME/trainstack`, else `~/.cache/trainstack`. Standard library only,
so anything (the emulator, tests, a provider at preview) can ask without loading more."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder for `env` (default: this process's environment, read now)."""
    env = os.environ if env is None else env
    explicit = env.get("TRAINSTACK_CACHE")
    if explicit:
        return Path(explicit)
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainstack"
