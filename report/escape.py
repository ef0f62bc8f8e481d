"""Strings from a config, an API or the engine, made inert for a pull-request comment (GitHub Markdown).

A value the report shows may come from anyone who can open a pull request: a registry username, a resource
name, a policy message that echoes a refused value. GitHub renders Markdown and a subset of HTML, links
`@team` mentions and bare URLs. So every such value goes through one of two helpers:

- `text(value)`: prose and table cells. HTML's `&`, `<`, `>` become entities (no `<img onerror>`, no
  `<details>`); Markdown's link, image, code, emphasis, strikethrough and table characters are
  backslash-escaped; `@name`, `://` and `www.` get a word joiner (U+2060), so no mention is sent and no
  link is made; newlines become `<br>`.
- `code(value)`: an inline code span that no backtick inside the value can close (its fence is longer
  than the longest backtick run: CommonMark's rule), padded with a space where CommonMark would otherwise
  strip or join one, with pipes escaped for table cells and newlines made spaces (a code span shows a line
  ending as a space anyway; a table row cannot hold one).

Both cut a value to `limit` characters (the JSON output keeps the whole text). tests/report/test_escape.py
parses what they make back with a CommonMark parser (GFM tables) over generated strings.
"""

from __future__ import annotations

import re

WORD_JOINER = "\u2060"
# `_` inside a word never opens or closes emphasis (CommonMark's flanking rules): only the others are escaped,
# so RUNPOD_SECRET_name reads as written in the raw Markdown too.
_MARKDOWN = re.compile(r"([\\`\[\]|!*~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_MENTION = re.compile(r"@(?=[\w-])")
_WWW = re.compile(r"(www)\.", re.IGNORECASE)
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
    s = _WWW.sub(lambda m: m.group(1) + WORD_JOINER + ".", s)  # GitHub links `www.host` without a scheme
    return s.replace("\n", "<br>")


def code(value: object, limit: int = 80) -> str:
    """`value` as one inline code span, safe inside a table cell."""
    s = _cut(str(value), limit).replace("\n", " ").replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end of a span that has one at both ends and is not all spaces:
    # padding such a value (or one that starts or ends with a backtick, which would join the fence) gives
    # the stripped space back. An all-space value is shown as it is; an empty one as a single space.
    spaced = s[:1] == " " and s[-1:] == " " and bool(s.strip(" "))
    pad = " " if s[:1] == "`" or s[-1:] == "`" or spaced else ""
    return f"{fence}{pad}{s or ' '}{pad}{fence}"
