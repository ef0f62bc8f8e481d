"""A no-op scripts/up is short, and every up says each warning once (issue #33, item 7 "Noise").

Before: a second, no-op `scripts/up dev` printed 127 lines (the stack outputs, ~90 of them, Pulumi's
progress rows repeating each warning up to three times before its Diagnostics section). Now Pulumi runs with
--suppress-outputs and --suppress-progress, and scripts/up drops the repeated rows when there is no
terminal; it ends with the cost (from the stack outputs) and the next step. Control plane only.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.pulumi_cli import REPO, run_killing_tree
from tests.e2e.test_restart import Demo

# In the parallel lane: its backend, state and lock are the case's own (Demo, ops/stacklock.py's lock per
# backend), and its local RunPod is never restarted.
pytestmark = [pytest.mark.e2e]

# Measured: 27 lines for a no-op scripts/up dev as root (before #33's one cap, 30: 2 of them the deprecated
# keys of policy/config/dev.json). Below 160 by far, with room for a few more warnings.
MAX_NOOP_LINES = 45


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    d = Demo(tmp_path)
    yield d
    run_killing_tree([str(REPO / "scripts/local-runpod"), "stop"], 120, env=d.env)


def _warnings(lines: list[str]) -> Counter[str]:
    """Each warning's text, with the part before `warning:` (a row's resource, a file name) dropped."""
    return Counter(line.split("warning:", 1)[1].strip() for line in lines if "warning:" in line)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_no_op_up_is_short_and_says_each_warning_once(stack: str, demo: Demo) -> None:
    first = demo.run("scripts/up", stack).splitlines()  # creates everything: its rows stay, warnings once
    assert not {w: n for w, n in _warnings(first).items() if n > 1}, "\n".join(first)
    # A shipped stack uses no deprecated key: its run cap is trainstack:run.max_cost_usd in the stack file,
    # and its policy config has none of the old cap keys (policy/config_file.py's notices).
    assert not [line for line in first if "deprecated" in line.lower()], "\n".join(first)
    lines = demo.run("scripts/up", stack).splitlines()
    text = "\n".join(lines)

    assert len(lines) <= MAX_NOOP_LINES, f"a no-op scripts/up printed {len(lines)} lines:\n{text}"
    repeated = {w: n for w, n in _warnings(lines).items() if n > 1}
    assert not repeated, f"warnings said more than once: {repeated}\n{text}"
    assert "deprecated" not in text.lower(), text
    # The program's own warnings are still said (once): the webhook one, and what control-plane skips.
    assert sum(w.startswith("alerts reach no chat") for w in _warnings(lines)) == 1, text
    assert sum(w.startswith("delivery skipped") for w in _warnings(lines)) == 1, text
    # A no-op: Pulumi's summary says so, and nothing is created or changed.
    assert re.search(r"^\s+\d+ unchanged$", text, re.M), text
    assert not re.search(r"\b(created|updated|replaced|deleted)\b", text), text
    assert "Outputs:" not in text
    # scripts/up's own last lines: the cost from the stack outputs, then the next step.
    assert re.fullmatch(
        rf"scripts/up: '{stack}' is up: \$[\d,]+\.\d\d/h; one run \$[\d,]+\.\d\d \(.+\); artifacts are in "
        rf"out/{stack}/",
        lines[-2],
    ), lines[-2]
    assert lines[-1].startswith(f"scripts/up: next: scripts/watch {stack} ")
    if stack == "dev":
        previewed_through_the_wrapper(demo, stack)


def _tracked_state() -> tuple[str, dict[str, bytes]]:
    """`git status` of the tracked files, and every stack file's bytes."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
    ).stdout
    return status, {p.name: p.read_bytes() for p in sorted((REPO / "stacks").glob("Pulumi.*.yaml"))}


def previewed_through_the_wrapper(demo: Demo, stack: str) -> None:
    """`scripts/pulumi preview --stack STACK`, as OPERATING.md and CLI.md give it, previews the demo's stack
    from its local workspace with the policy pack and writes no tracked file (issue #68: it ran from the repo,
    wrote an `encryptionsalt` into stacks/Pulumi.dev.yaml, rewrote its numbers and skipped the pack)."""
    before = _tracked_state()
    text = demo.run("scripts/pulumi", "preview", "--stack", stack)
    assert _tracked_state() == before
    assert "Policies:" in text and "trainstack" in text.split("Policies:", 1)[1], text
