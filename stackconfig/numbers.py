"""Numbers in the stack config: never a boolean, always finite, and within a stated range.

`Number` is a float field that takes an int, a float or numeric text (`pulumi config set --path k 2.5` stores
"2.5" as text; whole numbers and booleans it stores typed) and refuses a boolean, also inside models that
are otherwise strict. `in_range` is the check every bounded field states, with a message that never
formats a huge number (a 401-digit integer as `{:g}` is an OverflowError, not a message).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Strict


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"is {str(value).lower()}, a boolean; write a number")
    return value


Number = Annotated[float, BeforeValidator(_not_a_bool), Strict(False)]


def shown(value: float) -> str:
    """A number as a message may show it: `4.4e-309`, `1e+200`, or `a 401-digit number`."""
    if isinstance(value, int) and len(str(abs(value))) > 15:
        return f"a {len(str(abs(value)))}-digit number"
    try:
        return f"{value:g}"
    except OverflowError:
        return "a number too large to show"


def in_range(value: float, low: float, high: float, fix: str, *, low_open: bool = False) -> float:
    """`value` when `low <= value <= high` (`low < value` with low_open); else a ValueError with the fix."""
    below = value <= low if low_open else value < low
    if below or value > high:
        bound = "more than" if low_open else "at least"
        raise ValueError(f"must be {bound} {low:g} and at most {high:g}, got {shown(value)}; {fix}")
    return value
