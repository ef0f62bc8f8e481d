"""Strings from a config, an API or the engine, made inert for a pull-request comment (GitHub Markdown).

A value the report shows may come from anyone who can open a pull request: a registry username, a resource
name, a policy message that echoes a refused value. GitHub renders Markdown and a subset of HTML, links
`@team` mentions and bare URLs. So every such value goes through one of two helpers (issue #34):

- `text(value)`: prose and table cells. HTML's `&`, `<`, `>` become entities (no `<img onerror>`, no
  `<details>`); Markdown's link, image, code and table characters are backslash-escaped; `@name` and
  `://` get a word joiner (U+2060), so no mention is sent and no link is made; newlines become `<br>`.
- `code(value)`: an inline code span that no backtick inside the value can close (its fence is longer
  than the longest backtick run), with pipes escaped for table cells.

Both cut a value to `limit` characters (the JSON output keeps the whole text).
"""

from __future__ import annotations

import re

WORD_JOINER = "\u2060"
_MARKDOWN = re.compile(r"([\\`\[\]|!])")
_MENTION = re.compile(r"@(?=[\w-])")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _cut(value: str, limit: int) -> str:
    value = _CONTROLS.sub("", value).replace("\r", "")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def text(value: object, limit: int = 80) -> str:
    """`value` as literal text in Markdown, safe inside a table cell."""
    s = _cut(str(value), limit)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MARKDOWN.sub(r"\\\1", s)
    s = _MENTION.sub("@" + WORD_JOINER, s).replace("://", ":" + WORD_JOINER + "//")
    return s.replace("\n", "<br>")


def code(value: object, limit: int = 80) -> str:
    """`value` as one inline code span, safe inside a table cell."""
    s = _cut(str(value), limit).replace("\n", " ").replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"
