"""Each module's own import time on the process's CPU clock: `python -X importtime`'s self column, in CPU.

`-X importtime` reads the wall clock, so on a loaded machine a module's import also counts however long the
process waited for a core. `install()` wraps the import system's `_find_and_load` (what the interpreter
calls for a module not yet in `sys.modules`: finding, loading and running its body) and charges each
module the CPU seconds (`time.process_time`) spent in it less those of the imports it started, as
`-X importtime` does with wall time. Used by bench/forecast.py's cold-preview probe; install it before the
imports to be counted. One thread's imports: a second thread importing at the same time would be charged
to whichever module the first thread is in.
"""

from __future__ import annotations

import importlib._bootstrap as bootstrap  # the import system itself (the frozen _frozen_importlib)
import time
from typing import Any

SELF_CPU: dict[str, float] = {}  # module name -> CPU seconds of its own import
_open: list[float] = []  # per import in progress: CPU seconds its nested imports took


def install() -> None:
    """Start charging imports to SELF_CPU (idempotent)."""
    original: Any = getattr(bootstrap, "_find_and_load")  # noqa: B009 (typeshed leaves it out)
    if getattr(original, "trainstack_clocked", False):
        return

    def clocked(name: str, import_: Any) -> Any:
        _open.append(0.0)
        start = time.process_time()
        try:
            return original(name, import_)
        finally:
            spent = time.process_time() - start
            nested = _open.pop()
            SELF_CPU[name] = SELF_CPU.get(name, 0.0) + spent - nested
            if _open:
                _open[-1] += spent

    clocked.trainstack_clocked = True  # type: ignore[attr-defined]
    setattr(bootstrap, "_find_and_load", clocked)  # noqa: B010
