"""The docs' claims a test can hold: README's shape, links that lead somewhere, paths that exist.

Plain file reads and function calls; nothing here starts Pulumi, a server or a subprocess. Which docs are
held: `HELD` (the ones this suite's owner keeps; the forecast, performance and GPU-validation docs hold their
own figures in tests/forecast/ and tests/bench/).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"

HELD: tuple[Path, ...] = (
    README,
    *(
        DOCS / name
        for name in (
            "ARCHITECTURE.md",
            "MONITORING.md",
            "NODE-HEALTH.md",
            "OPERATING.md",
            "PREVIEW-REPORT.md",
            "RECOVERY.md",
            "RELIABILITY.md",
            "RUNPOD-CONTRACT.md",
            "SUPERVISOR.md",
            "TEAM-BUDGET.md",
            "TOOLCHAIN.md",
        )
    ),
    *sorted((DOCS / "journal").glob("*.md")),
)
# Docs that issue #46's other parts add (the CLI's reference, Slurm): README links them; until they land in
# this tree a link to them is the one kind allowed to lead nowhere, and once they exist they are held like
# every other target.
ARRIVING = {DOCS / "CLI.md", DOCS / "SLURM.md"}

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)


def _ids(paths: tuple[Path, ...]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


def _anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    text = _CODE_BLOCK.sub("", doc.read_text())
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


# ---- README: a newcomer reads it in five minutes ---------------------------------------------------------


def test_readme_is_short_and_gives_the_two_commands() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 80, f"README.md has {len(lines)} lines; keep it at 80 or fewer, the rest in docs/"
    blocks = "\n".join(_CODE_BLOCK.findall(text))
    for command in ("scripts/up", "scripts/test"):
        assert re.search(rf"^{re.escape(command)}\b", blocks, re.M), f"README.md's code shows no `{command}`"
        assert (REPO / command).is_file(), f"README.md's `{command}` does not exist"
    # no paragraph a newcomer has to wade through (issue #46: four were over 250 words)
    for paragraph in re.split(r"\n\s*\n|\n(?=- )", _CODE_BLOCK.sub("", text)):
        if paragraph.lstrip().startswith("|"):
            continue  # the table: one line a row
        assert len(paragraph.split()) <= 120, f"README.md paragraph over 120 words: {paragraph[:60]!r}..."


def test_readme_table_reaches_every_doc() -> None:
    """Every doc in docs/ is one click from README, directly or through OPERATING.md."""
    reached = {
        (README.parent / t).resolve() for t in _LINK.findall(README.read_text()) if not t.startswith("http")
    }
    operating = DOCS / "OPERATING.md"
    reached |= {(DOCS / t.split("#")[0]).resolve() for t in _LINK.findall(operating.read_text())}
    missing = sorted(
        p.name for p in DOCS.glob("*.md") if p.resolve() not in reached and p.name != "performance-notes.md"
    )
    assert not missing, f"docs not linked from README.md or docs/OPERATING.md: {missing}"


# ---- links and paths lead somewhere -----------------------------------------------------------------------


@pytest.mark.parametrize("doc", HELD, ids=_ids(HELD))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path_part, _, fragment = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            if path not in ARRIVING:
                broken.append(f"{target} (no such file)")
            continue
        if fragment and path.suffix == ".md" and fragment not in _anchors(path):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{doc.relative_to(REPO)}: broken links: {broken}"


_TOP = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")} | {".github"}
_PATH = re.compile(r"`(\.?[A-Za-z_][\w.-]*/[\w./-]*)`")


def _claimed_paths(doc: Path) -> list[str]:
    """Repo paths a doc names in backticks (`ops/ownership.py`), skipping templates (`out/<stack>/`) and
    paths that are made at run time (`.state/`, `out/`, the bucket's and the node's)."""
    made_at_run_time = (".state", "out", "logs", "run", "supervisor/<", "metrics")
    found = []
    for token in _PATH.findall(doc.read_text()):
        top = token.split("/")[0]
        if top not in _TOP or "<" in token or "*" in token or token.startswith(made_at_run_time):
            continue
        found.append(token.rstrip("/.,"))
    return found


# The journal keeps each entry as it was measured: a later change may move a path it names.
CURRENT = tuple(d for d in HELD if d.parent.name != "journal")


@pytest.mark.parametrize("doc", CURRENT, ids=_ids(CURRENT))
def test_named_repo_paths_exist(doc: Path) -> None:
    missing = sorted({p for p in _claimed_paths(doc) if not (REPO / p).exists()})
    assert not missing, f"{doc.relative_to(REPO)} names paths that do not exist: {missing}"


def test_the_path_check_can_fail(tmp_path: Path) -> None:
    doc = tmp_path / "X.md"
    doc.write_text("see `ops/no_such_module.py` and `out/<stack>/hostfile` and `ops/ownership.py`\n")
    assert _claimed_paths(doc) == ["ops/no_such_module.py", "ops/ownership.py"]


def test_anchor_rule_matches_githubs() -> None:
    assert _anchor("## `trainstack:supervisor` and `trainstack:run`".lstrip("# ")) == (
        "trainstacksupervisor-and-trainstackrun"
    )
    assert _anchor("Keys: each job the least (issue #45)") == "keys-each-job-the-least-issue-45"


# ---- flags the docs give a command are in its --help ------------------------------------------------------

# scripts/pulumi is the Pulumi CLI itself; scripts/up hands flags it does not know to `pulumi up`.
NOT_OURS = {"pulumi"}
PASSES_ON = {"up": "pulumi up flags"}


def _command_lines(text: str) -> list[str]:
    """Where a doc shows a command: inline code, fenced blocks and 4-space indented blocks, line by line."""
    spans = re.findall(r"`([^`\n]+)`", _CODE_BLOCK.sub("", text))
    spans += [line for block in _CODE_BLOCK.findall(text) for line in block.splitlines()]
    spans += [line for line in text.splitlines() if line.startswith("    ") and "scripts/" in line]
    return spans


def _claimed_flags() -> dict[str, set[str]]:
    """scripts/NAME -> the --flags the held docs write after it (up to a comment or the next command). The
    journal is left out: it keeps each command as it was run that day; a later change may rename a flag."""
    claims: dict[str, set[str]] = {}
    for doc in CURRENT:
        for span in _command_lines(doc.read_text()):
            for m in re.finditer(r"scripts/([a-z][a-z-]*)\b((?:(?!scripts/)[^#])*)", span):
                flags = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2))
                if flags and m.group(1) not in NOT_OURS:
                    claims.setdefault(m.group(1), set()).update(flags)
    return claims


CLAIMED = _claimed_flags()


@pytest.mark.parametrize("command", sorted(CLAIMED))
def test_flags_the_docs_give_are_in_the_commands_help(command: str) -> None:
    assert (REPO / "scripts" / command).is_file(), f"the docs name scripts/{command}, which does not exist"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_"))}
    proc = subprocess.run(  # --help prints and exits (tests/test_script_help.py holds that it does nothing)
        ["bash", str(REPO / "scripts" / command), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    unknown = sorted(f for f in CLAIMED[command] if not re.search(rf"{f}(?![\w-])", proc.stdout))
    if command in PASSES_ON and PASSES_ON[command] in proc.stdout:
        unknown = []  # the rest are Pulumi's own, which it hands on
    assert not unknown, f"the docs give scripts/{command} {unknown}, which its --help does not list"


def test_the_flag_scan_reads_every_form_of_command() -> None:
    text = "run `scripts/watch dev --once`\n\n    scripts/supervise STACK --log   # --not-this\n"
    spans = _command_lines(text)
    assert "scripts/watch dev --once" in spans and "    scripts/supervise STACK --log   # --not-this" in spans


def test_journal_entries_are_dated_and_indexed() -> None:
    journal = DOCS / "journal"
    index = (journal / "README.md").read_text()
    for entry in sorted(journal.glob("*.md")):
        if entry.name == "README.md":
            continue
        dated = re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", entry.name)
        assert dated, f"{entry.name}: name it YYYY-MM-DD-topic.md"
        assert f"]({entry.name})" in index, f"docs/journal/README.md does not list {entry.name}"
