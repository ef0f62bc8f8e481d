"""One fresh listing shared by every thread of the provider process that asks while it is being read.

The dynamic-provider process serves several resources at once (a thread pool). A pod pool used to cost one
`GET /v2/pods/{id}` per waiting pod per poll and one `GET /v2/pods` per create; with `SharedListing` every
caller that asks while a listing is in flight waits for the *next* one (a listing that started before the
caller asked may predate the caller's own POST, so it is never handed out) and all of them share it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedListing(Generic[T]):
    """Single-flight reads that are never older than the call that receives them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._started = 0  # listings begun
        self._done = 0  # generation of `_result`
        self._result: T | None = None
        self._in_flight = False

    def get(self, fetch: Callable[[], T]) -> T:
        with self._cond:
            needed = self._started + 1  # any listing that starts from now on is fresh enough
            while True:
                if self._done >= needed and self._result is not None:
                    return self._result
                if not self._in_flight:
                    self._in_flight = True
                    self._started += 1
                    generation = self._started
                    break
                self._cond.wait()
        try:
            result = fetch()
        except BaseException:
            with self._cond:
                self._in_flight = False
                self._cond.notify_all()  # a waiter becomes the next leader and reads for itself
            raise
        with self._cond:
            self._in_flight = False
            self._done, self._result = generation, result
            self._cond.notify_all()
        return result


_registry: dict[str, SharedListing[object]] = {}
_registry_lock = threading.Lock()


def shared(key: str) -> SharedListing[object]:
    """The process-wide listing for `key` (API base URL plus the collection)."""
    with _registry_lock:
        return _registry.setdefault(key, SharedListing())
