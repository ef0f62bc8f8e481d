"""The path of scripts/up's per-stack lock for an environment, asked of ops/stacklock.py itself."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ops.stacklock import lock_path


def stack_lock(stack: str, env: Mapping[str, str]) -> Path:
    """Where an up of `stack` run with `env` (its PULUMI_BACKEND_URL) takes its lock."""
    return lock_path(stack, env)
