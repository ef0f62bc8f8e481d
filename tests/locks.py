"""The path of scripts/up's per-stack lock for an environment, asked of scripts/lock.sh itself."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from harness.pulumi_cli import REPO


def stack_lock(stack: str, env: Mapping[str, str]) -> Path:
    """Where an up of `stack` run with `env` (its PULUMI_BACKEND_URL) takes its lock."""
    done = subprocess.run(
        ["bash", "-c", '. scripts/lock.sh && stack_lock "$1"', "-", stack],
        cwd=REPO, env=dict(env), capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return Path(done.stdout.strip())
