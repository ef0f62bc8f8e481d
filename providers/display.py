"""Show provider errors to `pulumi up` users as their message, not as a Python traceback.

Pulumi's dynamic-provider host reports any exception from create/read/update/delete with
`traceback.format_exc()`, so a refused API key or an exhausted GPU pool reaches the user as a page of
stack frames with the one useful line at the bottom. Inside that host only (never in tests or the
program), `install()` makes `format_exc` return just the message for trainstack's own error classes,
which are written to be read by people; anything else keeps its full traceback for debugging.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

_HOST_MODULE = "pulumi.dynamic.__main__"
_user_facing: tuple[type[BaseException], ...] = ()


def running_in_provider_host() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == _HOST_MODULE


def message_or_traceback(original: Callable[..., str]) -> Callable[..., str]:
    def format_exc(limit: int | None = None, chain: bool = True) -> str:
        error = sys.exc_info()[1]
        if isinstance(error, _user_facing):
            return f"{type(error).__name__}: {error}"
        return original(limit, chain)

    format_exc.__wrapped__ = original  # type: ignore[attr-defined]
    return format_exc


def install(*user_facing: type[BaseException]) -> None:
    """Register error classes whose message is the whole story; patch the host once."""
    global _user_facing
    _user_facing = tuple(dict.fromkeys((*_user_facing, *user_facing)))
    if running_in_provider_host() and not hasattr(traceback.format_exc, "__wrapped__"):
        traceback.format_exc = message_or_traceback(traceback.format_exc)
