"""The nodes' torch venv for the tests that run torch on CPU: where it is and the mark that skips without it.

scripts/bootstrap-torch (ops/torch_venv.py) installs it in the trainstack cache; TRAINSTACK_TORCH_VENV points
at another one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from common.cachedir import cache_dir

VENV = Path(os.environ.get("TRAINSTACK_TORCH_VENV", str(cache_dir() / "torch-venv")))


def needs(tool: str = "torchrun") -> pytest.MarkDecorator:
    """Skip unless the venv has `tool` in its bin/ (torchrun, python)."""
    return pytest.mark.skipif(
        not (VENV / "bin" / tool).exists(), reason=f"no torch venv at {VENV}; run scripts/bootstrap-torch"
    )
