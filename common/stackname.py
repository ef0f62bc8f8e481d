"""The one rule for a stack name, checked by every command that takes one before it builds a path from it.

A stack name becomes a path (`.state/local/<stack>`, `stacks/Pulumi.<stack>.yaml`, the lock, the artifacts
under `out/<stack>`) and part of every RunPod resource name (`trainstack-<stack>-pod-0`). Pulumi's own rule
(letters, digits, `-`, `_`, `.`; at most 100 characters) lets `..` and `.` through, which would walk out of
those folders, so trainstack holds a name to the subset every one of those uses can carry: lowercase letters,
digits and `-`, starting with a letter or digit, at most 100 characters (a valid Pulumi stack name too).

The shell scripts ask here before anything else (`python -m common.stackname PROG STACK...`: nothing on
stdout, exit 0 when every name is valid; one line per bad name on stderr, exit 2), and the Python entry points
call `stack_name_problem`. Standard library only: it runs before the virtual environment may exist.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

MAX_LENGTH = 100  # Pulumi's limit on a stack name
_RULE = re.compile(r"[a-z0-9][a-z0-9-]*")
RULE_TEXT = (
    f"use lowercase letters, digits and '-', starting with a letter or digit, at most {MAX_LENGTH} "
    "characters (the name becomes a folder and part of every RunPod resource name), e.g. dev or dev-red"
)
EXIT_BAD_NAME = 2


def stack_name_problem(name: str) -> str | None:
    """None for a valid stack name; else `stack <name>: not a valid stack name; <fix>`, the name escaped."""
    if len(name) <= MAX_LENGTH and _RULE.fullmatch(name):
        return None
    return f"stack {shown(name)}: not a valid stack name; {RULE_TEXT}"


def shown(name: str) -> str:
    """The name as a quoted, escaped, shortened literal: safe in a terminal whatever it holds."""
    text = ascii(name[:60])
    return text + " (shortened)" if len(name) > 60 else text


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m common.stackname PROG STACK...`: 0 when every STACK is valid, else 2 and a line each."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m common.stackname PROG STACK...", file=sys.stderr)
        return EXIT_BAD_NAME
    prog, names = args[0], args[1:]
    problems = [p for name in names if (p := stack_name_problem(name)) is not None]
    for problem in problems:
        print(f"{prog}: {problem}", file=sys.stderr)
    return EXIT_BAD_NAME if problems or not names else 0


if __name__ == "__main__":
    sys.exit(main())
