"""The one door to the stack files, `stacks/Pulumi.<stack>.yaml`: which stacks there are, each one's config.

Every entry point that reads a stack file without Pulumi (`scripts/forecast`, `scripts/up`'s local account
and demo setup, the local workspaces, the benchmarks, the GPU validation plans) opens it here, so a missing
stack is refused with the same message everywhere and the config map is read the same way (an empty file or
an empty `config:` is an empty map). `load` parses it exactly as `pulumi preview` would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from common.errors import TrainstackError

if TYPE_CHECKING:
    from stackconfig.config import StackConfig

REPO = Path(__file__).resolve().parents[1]
STACKS_DIR = REPO / "stacks"
_SECRETS_PREFIX = "trainstack:secrets."  # stackconfig.config.secret_config_key: values never read here


class UnknownStackError(TrainstackError, ValueError):
    """No stack file of that name; the message lists the stacks there are."""

    def __init__(self, stack: str, stacks_dir: Path) -> None:
        self.stack = stack
        path = stack_path(stack, stacks_dir)
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        known = ", ".join(stack_names(stacks_dir))
        super().__init__(f"no stack '{stack}': {shown} does not exist (known: {known})")


def stack_path(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """Where the stack's file is (whether or not it exists)."""
    return stacks_dir / f"Pulumi.{stack}.yaml"


def stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """The stacks with a file, sorted."""
    return sorted(
        p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml")
    )


def stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """The stack's file; UnknownStackError when there is none."""
    path = stack_path(stack, stacks_dir)
    if not path.is_file():
        raise UnknownStackError(stack, stacks_dir)
    return path


def read_config(stack: str, stacks_dir: Path = STACKS_DIR) -> dict[str, Any]:
    """The stack file's `config:` map as written (secret values, if any were stored, included)."""
    doc = yaml.safe_load(stack_file(stack, stacks_dir).read_text()) or {}
    return dict(doc.get("config") or {})


def without_secrets(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` without the `trainstack:secrets.*` values (ciphertext in a stack file; never parsed here)."""
    return {k: v for k, v in raw.items() if not k.startswith(_SECRETS_PREFIX)}


def load(stack: str, stacks_dir: Path = STACKS_DIR, warn: Callable[[str], None] | None = None) -> StackConfig:
    """The stack file's config, parsed and checked (ConfigError lists every problem)."""
    from stackconfig.loader import load_stack_config  # the models build only for callers that parse

    return load_stack_config(without_secrets(read_config(stack, stacks_dir)), warn=warn)
