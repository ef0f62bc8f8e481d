"""Request bodies decoded the way a strict server does: malformed JSON is a 400 problem, never a 500.

The v2 spec's BadRequestError is "the request could not be processed because it is malformed" and its
UnprocessableEntityError is "syntactically valid but failed validation", so a body that cannot be read
as JSON text (bad syntax, a lone UTF-16 surrogate such as "\\ud800" that no UTF-8 text can hold, an
integer longer than Python's 4300-digit conversion limit, nesting past `MAX_DEPTH`) is a 400, and a
readable body that breaks a schema is a 422 (emulator/spec.py).
"""

from __future__ import annotations

import json
import math
from typing import Any

from emulator.problems import ApiError

# Ours: the deepest v2 request body (a pod create's mounts.network[0]) nests 4 levels; RunPod does not
# publish a limit. Deeper bodies are refused before any walk could recurse.
MAX_DEPTH = 32


def parse_json(raw: bytes) -> Any:
    """The decoded body (None when empty), or a 400 that says what is wrong with it."""
    if not raw:
        return None
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_not_json)
    except RecursionError:
        raise _bad(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, and int() past its digit limit
        if "digits" in str(exc) or "too large" in str(exc):
            raise _bad("a number in the body is too large to read") from None
        raise _bad("the body is not valid JSON") from None
    check_text(value)
    return value


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError("a number in the body is too large to represent")
    return number


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")  # Python accepts NaN/Infinity; JSON (RFC 8259) does not


def check_text(value: Any) -> None:
    """400 if the decoded value nests past `MAX_DEPTH` or holds a string that is not valid Unicode.

    Walked with an explicit stack, so a deep value cannot exhaust Python's recursion limit here.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _bad(f"the body nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_string(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("a string in the body is not valid Unicode (a lone UTF-16 surrogate?)") from None


def _bad(reason: str) -> ApiError:
    return ApiError(400, f"Malformed request body: {reason}.", errors=[f"/: {reason}"])
