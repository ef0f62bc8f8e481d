"""The training-progress contract (version 1): what a job writes, and the reader the metrics agent tails.

A job reports progress by appending one JSON object per logged step, one line each, to the file named by
`$TRAINSTACK_PROGRESS_FILE` (the start script exports it; no import of trainstack is needed):

    {"v": 1, "time": 1764528000.5, "step": 1200, "step_time_s": 0.0312, "samples_per_s": 2051.3,
     "tokens_per_s": 4201062.4, "loss": 2.8731}

    field          type            required  meaning
    v              int             no (1)    contract version; readers skip lines of a version they lack
    step           int 0..2**53    yes       optimizer steps done so far (the job's global step)
    step_time_s    number > 0      yes       mean wall time of one step since the previous line
    samples_per_s  number >= 0     one of    samples (sequences) per second, whole job, all ranks
    tokens_per_s   number >= 0     these     tokens per second, whole job, all ranks
    loss           number or null  yes       the training loss at that step (null: not computed)

    time           number          no        Unix time in seconds when the line was written
    checkpoint_s   number >= 0     no        seconds this job has spent saving checkpoints since it started
                                             (a running total; a new start of the job begins again at 0)

Every number is finite: NaN, Infinity and a value no float holds (a 400-digit integer) are refused.

Rules: UTF-8, one object per line, each line written whole with one `write` of the file opened for append
(so a reader never sees half a line), at most 4096 bytes a line. Unknown fields are ignored, so a job may
add its own. Each node's local rank 0 writes (every node's agent then sees progress); a job that writes
from global rank 0 only leaves the other nodes' agents reporting no progress, which is allowed.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = 1
ENV = "TRAINSTACK_PROGRESS_FILE"
MAX_LINE_BYTES = 4096
# A poll reads at most this much, from the end: a job that wrote more since the last poll (a fast job, or
# an agent that was stopped) is caught up at once by skipping to the newest MiB, so the reader never falls
# behind (64 KiB a poll fell 9,478 lines behind over 20 polls). 1 MiB is ~7,000 lines to parse.
_MAX_POLL_BYTES = 1 << 20
# The largest step a float (Prometheus' sample type) holds exactly; a 401-digit step made /metrics fail.
MAX_STEP = 2**53


class ProgressError(ValueError):
    """A line that breaks the contract; the message names the field."""


@dataclass(frozen=True)
class Progress:
    """One valid contract line."""

    step: int
    step_time_s: float
    samples_per_s: float | None
    tokens_per_s: float | None
    loss: float | None
    time: float | None  # as the job wrote it; None when it did not
    checkpoint_s: float | None = None  # seconds saving checkpoints since the job started; None: not said


def _number(obj: dict[str, Any], key: str, *, low: float, strict: bool, required: bool) -> float | None:
    value = obj.get(key)
    if value is None:
        if required and key not in obj:
            raise ProgressError(f"'{key}' is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise ProgressError(f"'{key}' must be a finite number, got {_shown(value)}")
    if value < low or (strict and value == low):
        raise ProgressError(f"'{key}' must be {'>' if strict else '>='} {low:g}, got {_shown(value)}")
    return float(value)


def _finite(value: float) -> bool:
    """Finite and a float can hold it (a 400-digit integer is an OverflowError for float() and isfinite)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _no_constant(name: str) -> Any:
    raise ProgressError(f"{name} is not a number JSON allows")


def parse_line(line: str) -> Progress:
    """One line of the contract as a record; ProgressError names what is wrong."""
    if len(line.encode("utf-8")) > MAX_LINE_BYTES:
        raise ProgressError(f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        obj = json.loads(line, parse_constant=_no_constant)  # NaN, Infinity: refused
    except json.JSONDecodeError as exc:
        raise ProgressError(f"not JSON ({exc.msg})") from None
    except ValueError as exc:  # Python's own limit on integer digits (4300)
        raise ProgressError(f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ProgressError("not a JSON object")
    version = obj.get("v", VERSION)
    if version != VERSION:
        raise ProgressError(f"'v' is {version!r}; this reader knows version {VERSION}")
    step = obj.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise ProgressError(f"'step' must be a whole number from 0 to 2**53, got {_shown(step)}")
    step_time = _number(obj, "step_time_s", low=0, strict=True, required=True)
    samples = _number(obj, "samples_per_s", low=0, strict=False, required=False)
    tokens = _number(obj, "tokens_per_s", low=0, strict=False, required=False)
    if samples is None and tokens is None:
        raise ProgressError("neither 'samples_per_s' nor 'tokens_per_s' is given")
    if "loss" not in obj:
        raise ProgressError("'loss' is missing (write null when it was not computed)")
    loss = _number(obj, "loss", low=-math.inf, strict=False, required=True)  # finite, or null
    stamp = _number(obj, "time", low=0, strict=False, required=False)
    saving = _number(obj, "checkpoint_s", low=0, strict=False, required=False)
    assert step_time is not None  # required=True above
    return Progress(step, step_time, samples, tokens, loss, stamp, saving)


def progress_line(
    step: int,
    step_time_s: float,
    loss: float | None,
    *,
    samples_per_s: float | None = None,
    tokens_per_s: float | None = None,
    now: float | None = None,
    checkpoint_s: float | None = None,
) -> str:
    """A contract line (with its newline) for jobs that may import this module; others write the JSON."""
    obj: dict[str, Any] = {"v": VERSION, "step": step, "step_time_s": step_time_s, "loss": loss}
    if samples_per_s is not None:
        obj["samples_per_s"] = samples_per_s
    if tokens_per_s is not None:
        obj["tokens_per_s"] = tokens_per_s
    if now is not None:
        obj["time"] = now
    if checkpoint_s is not None:
        obj["checkpoint_s"] = checkpoint_s
    line = json.dumps(obj, separators=(",", ":"))
    parse_line(line)  # never write what the reader would refuse
    return line + "\n"


@dataclass
class TailResult:
    """What one poll of the file found."""

    latest: Progress | None  # the newest valid line read in this poll
    lines: int  # complete lines read in this poll
    malformed: list[str]  # one reason per refused line


class ProgressTail:
    """Follows a contract file by byte offset: only whole lines, restarts when the file is truncated or
    replaced (a new run), and never holds the file open between polls (the job may rotate it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""

    def poll(self) -> TailResult:
        result = TailResult(None, 0, [])
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self._offset:
                    self._inode, self._offset, self._partial = st.st_ino, 0, b""
                skipped = st.st_size - self._offset > _MAX_POLL_BYTES
                if skipped:  # far behind: only the newest lines matter (latest), so jump to them
                    self._offset, self._partial = st.st_size - _MAX_POLL_BYTES, b""
                f.seek(self._offset)
                chunk = f.read(_MAX_POLL_BYTES)
        except FileNotFoundError:
            return result
        self._offset += len(chunk)
        if skipped:  # the jump landed inside a line: drop that line's tail
            _, _, chunk = chunk.partition(b"\n")
        *whole, self._partial = (self._partial + chunk).split(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:  # a runaway line: drop it rather than grow without bound
            result.malformed.append(f"line longer than {MAX_LINE_BYTES} bytes")
            self._partial = b""
        for raw in whole:
            if not raw.strip():
                continue
            result.lines += 1
            try:
                result.latest = parse_line(raw.decode("utf-8", errors="replace"))
            except ProgressError as exc:
                result.malformed.append(str(exc))
        return result
