"""The PR report's two helpers (report/escape.py) parsed back with a CommonMark parser that knows GFM tables
and strikethrough (markdown-it-py, in the lock through rich), over generated strings (issue #49, class 5).

What GitHub renders is CommonMark plus GFM's tables, strikethrough and autolinks: a value shown with `code`
must come back as exactly one code span holding the value, whatever backticks, pipes or spaces it holds
(the fence is longer than any backtick run inside: CommonMark's rule); a value shown with `text` must come
back as its own characters (less the word joiners that stop mentions and links), with no emphasis, link,
image, code span or HTML of its own; and neither may add or remove a table column."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from report.cli import main
from report.escape import WORD_JOINER, code, text

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# Markdown's and HTML's characters, backtick runs, whitespace and a little of everything else.
ALPHABET = st.sampled_from([*"`|\\*_~[]()!<>&@#:/.- \n\tax1é", "``", "```", "www.", "://", "&amp;"])
hostile = st.lists(ALPHABET, max_size=30).map("".join) | st.text(max_size=40)


def _cells(row: str, columns: int = 2) -> list[list[Any]]:
    """The inline tokens of each cell of `row`, the body row of a table with `columns` columns."""
    head = "| " + " | ".join("h" * (i + 1) for i in range(columns)) + " |\n|" + "---|" * columns + "\n"
    tokens = MD.parse(head + row + "\n")
    body = [t for t in tokens if t.type == "inline" and t.map and t.map[0] == 2]
    assert any(t.type == "table_open" for t in tokens), row
    return [list(t.children or []) for t in body]


def _shown(value: str, limit: int = 80) -> str:
    """What the helpers promise to show: control characters dropped, cut to `limit`."""
    value = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "", value).replace("\r", "")
    return value if len(value) <= limit else value[: limit - 1] + "…"


@given(hostile)
@example("ghcr`x")  # the registry name
@example(" ` ")
@example(" x ")
@example("")
@example("a\\|b")
@settings(max_examples=300)
def test_code_is_one_span_holding_the_value(value: str) -> None:
    cells = _cells(f"| {code(value)} | after |")
    assert len(cells) == 2, (value, code(value))
    spans = cells[0]
    assert [t.type for t in spans] == ["code_inline"], (value, code(value), spans)
    assert spans[0].content == (_shown(value).replace("\n", " ") or " "), (value, code(value))
    assert [t.content for t in cells[1]] == ["after"]  # the next cell is not swallowed


@given(hostile)
@example("pod-`-unbalanced")
@example("*bold* _it_ ~~gone~~ [x](y) ![i](j) <b>")
@example("see www.evil.example or https://evil.example, @team")
@settings(max_examples=300)
def test_text_is_its_own_characters_and_nothing_else(value: str) -> None:
    cells = _cells(f"| {text(value)} | after |")
    assert len(cells) == 2, (value, text(value))
    kinds = {t.type for t in cells[0]}
    assert kinds <= {"text", "html_inline"}, (value, text(value), kinds)
    assert all(t.content == "<br>" for t in cells[0] if t.type == "html_inline"), text(value)
    back = "".join("\n" if t.type == "html_inline" else t.content for t in cells[0])
    # A table cell is trimmed, and a line's edge spaces around <br> are Markdown's to keep or drop.
    expected = _shown(value)
    assert _squash(back.replace(WORD_JOINER, "")) == _squash(expected), (value, text(value), back)
    raw = text(value)
    assert "://" not in raw and not re.search(r"www\.", raw, re.I) and not re.search(r"@\w", raw)


def _squash(value: str) -> str:
    return "\n".join(line.strip() for line in value.strip().split("\n")).strip()


def _recording(directory: Path, value: str) -> None:
    urn = f"urn:pulumi:dev::p::pulumi-python:dynamic/runpod:RegistryAuth::{value}"
    step = {
        "op": "create",
        "urn": urn,
        "type": "pulumi-python:dynamic/runpod:RegistryAuth",
        "new": {"inputs": {"name": value, "username": value, "cost_per_hour": 0.0}},
    }
    events = [
        {"resourcePreEvent": {"metadata": step}},
        {"diagnosticEvent": {"severity": "warning", "message": f"{value}\n"}},
        {
            "policyEvent": {
                "enforcementLevel": "mandatory",
                "message": f"refused `{value}`",
                "policyName": value,
                "resourceUrn": urn,
            }
        },
        {"summaryEvent": {"result": "succeeded"}},
    ]
    (directory / "dev.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (directory / "dev.export.json").write_text(json.dumps({"deployment": {"resources": []}, "version": 3}))


@given(hostile.filter(lambda v: v.strip() != "" and "::" not in v))
@example("ghcr`x")
@settings(max_examples=40, deadline=None)
def test_the_whole_report_keeps_its_tables_whatever_a_value_holds(value: str) -> None:
    """A value in a resource name, a property, a warning and a policy violation, through the real entry
    point: every table row has its table's columns, and nothing renders as a link, image or HTML."""
    with tempfile.TemporaryDirectory() as tmp, _quiet() as out:
        _recording(Path(tmp), value)
        main(["--recorded", tmp, "dev"])
    markdown = out.getvalue()
    tokens = MD.parse(markdown)
    for token in tokens:
        for child in token.children or []:
            assert child.type not in ("link_open", "image"), (value, markdown)
            assert child.type != "html_inline" or child.content == "<br>", (value, markdown)
    assert not [t for t in tokens if t.type == "html_block" and "trainstack-preview-report" not in t.content]
    spans = [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]
    name = _shown(value).replace("\n", " ") or " "  # nothing left but controls: shown as a space
    assert name in spans, (value, spans)  # the resource's name, whole
    widths: list[int] = []
    for token in tokens:
        if token.type in ("thead_open",):
            widths.append(0)
        if token.type in ("th_open",) and widths:
            widths[-1] += 1
        if token.type == "tr_open":
            row: list[int] = []
        if token.type == "td_open":
            row.append(1)
        if token.type == "tr_close" and row:
            assert len(row) == widths[-1], (value, markdown)
            row = []


class _quiet:
    """stdout captured without pytest's fixtures (hypothesis runs the body many times)."""

    def __enter__(self) -> Any:
        import contextlib
        import io

        self._buffer = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self._buffer)
        self._redirect.__enter__()
        return self._buffer

    def __exit__(self, *exc: object) -> None:
        self._redirect.__exit__(*exc)
