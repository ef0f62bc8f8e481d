"""Text from a config, an API or a node, made safe to show on a terminal.

A string that reached us from outside may carry terminal controls: ESC `]0;` sets the window title, `[2J`
clears the screen, OSC 8 makes a link, a bare CR overwrites the line. `plain` drops every control character
(C0 and C1, DEL, and ESC with them) except tab and newline when asked; `for_rich` also escapes rich's
markup, so `[/bold]` prints as text instead of raising MarkupError and `[link=...]` makes no hyperlink.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_AND_NEWLINES = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def plain(text: object, *, keep_newlines: bool = False) -> str:
    """`text` with control characters removed (tab and, with keep_newlines, newline kept)."""
    pattern = _CONTROLS if keep_newlines else _CONTROLS_AND_NEWLINES
    return pattern.sub("", str(text))


def for_rich(text: object, *, keep_newlines: bool = False) -> str:
    """`text` as rich should print it: controls removed, markup escaped."""
    return escape(plain(text, keep_newlines=keep_newlines))
