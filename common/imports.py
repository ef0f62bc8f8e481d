"""Imports with the cyclic garbage collector paused (standard library only).

A process that starts by importing a large library graph (the Pulumi SDK, gRPC and protobuf, pydantic and our
models; torch on the nodes) makes hundreds of thousands of objects, none of them garbage, and CPython's
collector walks the older ones again at every third-generation pass it runs while they are made. Pausing it
for the imports and freezing what they made (`gc.freeze`: moved out of every later pass, and left in shared
pages in a forked child) keeps what the imports cost to the imports themselves. Measured on the 2-core CI
machine, paired runs, CPU-s per process: the Pulumi program's own imports after the SDK's 0.61 -> 0.41; the
dynamic-provider host's gRPC, SDK and provider imports 0.49 -> 0.36
(docs/journal/2026-12-05-perf-suite-cpu-6.md).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block (its imports) with the cyclic collector off, then freeze every object made so far and
    turn the collector back on if it was on. Reference counting still frees whatever the block drops."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
