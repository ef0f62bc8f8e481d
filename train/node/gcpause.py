"""Large imports on a node with the cyclic garbage collector paused (standard library only: the node tools
are delivered without the project's `common/`, whose `common/imports.collector_paused` is the same idea for
the control plane's processes).

`import torch` or boto3's client makes some hundred thousand objects, none of them garbage, and CPython's
collector walks the older ones again at every pass it runs while they are made. Paused for the block, then
the block's objects frozen (`gc.freeze`: out of every later pass, and left in shared pages in a forked child),
the imports cost only themselves. Figures, paired runs on the local RunPod's CPU nodes: train/node/launch.py's
`import_torch` and train/node/transfer.py's `_client`."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, then freeze every object made so far and turn the
    collector back on if it was on. Reference counting still frees whatever the block drops."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
