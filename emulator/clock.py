"""Injectable clocks: scaled wall time that tests can also advance by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Seconds since the epoch, as the emulator sees them."""

    def now(self) -> float: ...


class ScaledClock:
    """Wall time running `scale` times faster (0 = frozen), plus whatever `advance` added.

    Starts at `start` (a restored high-water mark) so a restart never moves time backwards.
    """

    def __init__(self, scale: float, start: float | None = None) -> None:
        self.scale = scale
        self._origin = max(start or 0.0, time.time())
        self._mono = time.monotonic()
        self._offset = 0.0

    def now(self) -> float:
        return self._origin + (time.monotonic() - self._mono) * self.scale + self._offset

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._offset += seconds
        return self.now()
