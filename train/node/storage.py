"""Latency of small synced writes and uncached reads on the checkpoint directory (NVMe or network volume).

Each probe writes `ops` blocks of 4 KiB, each followed by fsync (what a checkpoint's metadata and a
rename cost), then reads the blocks back with O_DIRECT, so a read measures the device, not memory. Where
the file system refuses O_DIRECT (tmpfs, some overlays) it drops the file from the page cache instead
(POSIX_FADV_DONTNEED), which not every file system honours: `direct_reads` says which one was used.
Latencies are kept in a rolling window; p50 / p99 come from it.
"""

from __future__ import annotations

import json
import mmap
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

BLOCK = 4096
PROBE_NAME = ".trainstack-latency-probe"


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


@dataclass(frozen=True)
class Latency:
    """p50 / p99 in microseconds over the window, and how many operations it holds."""

    write_p50_us: float
    write_p99_us: float
    read_p50_us: float
    read_p99_us: float
    window_ops: int


class StorageProbe:
    """One probe file in `directory`; `probe()` measures, `latency()` summarises the window."""

    def __init__(
        self,
        directory: Path,
        ops: int = 8,
        window: int = 512,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.path = directory / PROBE_NAME
        self.ops = ops
        self._clock = clock
        self._writes: deque[float] = deque(maxlen=window)
        self._reads: deque[float] = deque(maxlen=window)
        self._block = os.urandom(BLOCK)
        self._buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
        self.direct_reads: bool | None = None  # None until the first probe

    def probe(self) -> None:
        """One round of `ops` synced writes and `ops` uncached reads; OSError propagates to the caller."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            for i in range(self.ops):
                start = self._clock()
                os.pwrite(fd, self._block, i * BLOCK)
                os.fsync(fd)
                self._writes.append(self._clock() - start)
        finally:
            os.close(fd)
        rfd = self._open_for_reads()
        try:
            for i in range(self.ops):
                start = self._clock()
                os.preadv(rfd, [self._buf], i * BLOCK)
                self._reads.append(self._clock() - start)
        finally:
            os.close(rfd)

    def _open_for_reads(self) -> int:
        if self.direct_reads is not False and hasattr(os, "O_DIRECT"):
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
            except OSError:  # EINVAL: this file system has no O_DIRECT
                self.direct_reads = False
            else:
                self.direct_reads = True
                return fd
        fd = os.open(self.path, os.O_RDONLY)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return fd

    def latency(self) -> Latency | None:
        if not self._writes or not self._reads:
            return None
        w, r = list(self._writes), list(self._reads)
        us = 1e6
        return Latency(
            quantile(w, 0.5) * us,
            quantile(w, 0.99) * us,
            quantile(r, 0.5) * us,
            quantile(r, 0.99) * us,
            len(w),
        )

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class LatencySource(Protocol):
    """What the agent samples storage latency from: `StorageProbe`, or `LatencyFile` on CPU test hosts."""

    def probe(self) -> None: ...

    def latency(self) -> Latency | None: ...

    def remove(self) -> None: ...


class LatencyFile:
    """Latency figures read from a JSON object with `Latency`'s fields (re-read at every probe) instead of
    measured: a test decides what the volume's p99 is, where a real fsync on a loaded machine's tmpfs can
    take milliseconds. A missing or malformed file raises OSError (a failed probe, counted by the agent)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._latest: Latency | None = None

    def probe(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            self._latest = Latency(
                write_p50_us=float(raw["write_p50_us"]),
                write_p99_us=float(raw["write_p99_us"]),
                read_p50_us=float(raw["read_p50_us"]),
                read_p99_us=float(raw["read_p99_us"]),
                window_ops=int(raw["window_ops"]),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise OSError(f"{self.path}: not a latency record ({type(exc).__name__}: {exc})") from None

    def latency(self) -> Latency | None:
        return self._latest

    def remove(self) -> None:
        """The file is the test's, not the agent's."""
