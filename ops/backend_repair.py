"""Repair what a killed Pulumi leaves torn in a file backend, before the next command reads the stack.

Pulumi's file backend (gocloud.dev's fileblob driver) keeps each object's attributes (content type, MD5) in
a sidecar `<object>.attrs`, written in place before the object itself is renamed into place. A Pulumi
SIGKILLed while writing that sidecar leaves it empty or cut short, and from then on every command fails to
read the stack ("failed to load checkpoint: EOF") although the checkpoint beside it is whole (the previous
one: the new one never got renamed in). fileblob reads an absent sidecar as "no attributes", so removing a
torn one, and never anything else, lets the next command read the last whole checkpoint. The supervisor
does this at the start of each round (a supervisor killed during its update must leave nothing
the next round cannot finish).

    python -m ops.backend_repair        (PULUMI_BACKEND_URL from the environment; prints what it removed)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse


def file_backend_root(url: str | None) -> Path | None:
    """The directory of a `file://` backend URL; None for any other backend (nothing of ours to repair)."""
    if not url or not url.startswith("file://"):
        return None
    parsed = urlparse(url)
    return Path(unquote(parsed.netloc + parsed.path)).expanduser()


def torn_sidecars(root: Path) -> list[Path]:
    """Every `.attrs` sidecar under the backend's `.pulumi/` that is not a JSON object."""
    torn = []
    for path in sorted((root / ".pulumi").rglob("*.attrs")):
        try:
            whole = isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
        except (ValueError, UnicodeDecodeError):
            whole = False
        except OSError:  # gone meanwhile, or unreadable: not ours to judge
            continue
        if not whole:
            torn.append(path)
    return torn


def repair(url: str | None = None, log: Callable[[str], None] = print) -> list[Path]:
    """Remove the torn sidecars of the backend at `url` (default: $PULUMI_BACKEND_URL); what was removed."""
    root = file_backend_root(url if url is not None else os.environ.get("PULUMI_BACKEND_URL"))
    if root is None or not root.is_dir():
        return []
    removed = []
    for path in torn_sidecars(root):
        how = "cut short" if path.stat().st_size else "empty"
        path.unlink(missing_ok=True)
        removed.append(path)
        log(
            f"state: removed {path.relative_to(root)}, an attributes file a killed pulumi left {how}; "
            "the checkpoint beside it is read as it is"
        )
    return removed


def main() -> int:
    repair()
    return 0


if __name__ == "__main__":
    sys.exit(main())
