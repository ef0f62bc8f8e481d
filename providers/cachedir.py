"""trainstack's per-user cache folder, the same rule scripts/bootstrap and scripts/env.sh follow:
`$TRAINSTACK_CACHE`, else `$XDG_CACHE_HOME/trainstack`, else `~/.cache/trainstack`. Standard library only,
so anything (the emulator, tests, a provider at preview) can ask without loading more."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("TRAINSTACK_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainstack"
