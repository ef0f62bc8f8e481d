"""ops/upflags.py's table of `pulumi up`'s flags is the CLI's: what `pulumi up --help` of the CLI
scripts/bootstrap built lists, each with its shorthand and whether it takes a value (issue #62)."""

from __future__ import annotations

import re

import pytest

from common import pulumi
from ops.upflags import FLAGS, HIDDEN

pytestmark = [pytest.mark.e2e]

# pflag's usage lines: `  -s, --stack string   ...`, `      --diff   ...`, `  -r, --refresh string[="true"]`
_LINE = re.compile(r"^\s{2,}(?:-(?P<short>\w), )?--(?P<name>[a-z0-9-]+)(?: (?P<type>\S+))?(?:\s{2,}|$)")


def listed(help_text: str) -> dict[str, tuple[str, str]]:
    out = {}
    for line in help_text.splitlines():
        m = _LINE.match(line)
        if m:
            kind = m["type"] or ""
            takes = "optional" if "[=" in kind else "value" if kind else "none"
            out[m["name"]] = (m["short"] or "", takes)
    return out


def test_the_table_is_what_pulumi_up_help_lists() -> None:
    done = pulumi.run(["up", "--help"], env=pulumi.environment(), check=True, timeout=60)
    shown = listed(done.stdout)
    assert {"skip-preview", "policy-pack", "cwd", "color"} <= set(shown)  # its Flags and Global Flags
    table = {f.name: (f.short, f.takes) for f in FLAGS if f.name not in HIDDEN}
    assert shown == table
