"""The workflow's steps are calls that return records (issue #64): no module of ops/ but the command line
(ops/cli.py) calls another module's `main(argv)`, captures a step's stdout or stderr to read it, or raises
SystemExit outside its own `main`; the exit codes of docs/CLI.md are a command's, not data passed between
steps. An AST scan, proven able to fail on a sample of each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMAND_LAYER = {"cli.py", "__init__.py"}
NOT_YET: set[tuple[str, str]] = set()  # (module, function) that may still raise SystemExit: none
_CAPTURES = ("redirect_stdout", "redirect_stderr")


def _functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def steps_that_call_commands(tree: ast.AST, name: str = "") -> list[str]:
    found = []
    for func in _functions(tree):
        for node in ast.walk(func):
            if isinstance(node, ast.Call):
                called = node.func
                if isinstance(called, ast.Attribute) and called.attr == "main":
                    found.append(f"{func.name}: line {node.lineno}: calls {ast.unparse(called)}(...)")
                if isinstance(called, ast.Attribute) and called.attr in (
                    "redirect_stdout",
                    "redirect_stderr",
                ):
                    found.append(f"{func.name}: line {node.lineno}: captures a step's output to read it")
            if isinstance(node, ast.Raise) and func.name != "main" and (name, func.name) not in NOT_YET:
                raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(raised, ast.Name) and raised.id == "SystemExit":
                    found.append(f"{func.name}: line {node.lineno}: raises SystemExit outside a command")
    return found


def test_no_step_of_ops_calls_a_command_or_exits() -> None:
    seen = {}
    for path in sorted((REPO / "ops").glob("*.py")):
        if path.name not in COMMAND_LAYER:
            found = steps_that_call_commands(ast.parse(path.read_text()), path.name)
            if found:
                seen[path.name] = found
    assert seen == {}


@pytest.mark.parametrize(
    "sample",
    [
        "def _up():\n    if plan_cost.main([stack]) != 0:\n        return 2\n",
        "def _down():\n    with contextlib.redirect_stdout(io.StringIO()) as left:\n        left()\n",
        "def export_state():\n    raise SystemExit(f'orphans: {exc}') from None\n",
    ],
)
def test_the_scan_can_fail(sample: str) -> None:
    assert steps_that_call_commands(ast.parse(sample))


def test_a_commands_own_main_may_exit() -> None:
    assert not steps_that_call_commands(ast.parse("def main():\n    raise SystemExit(2)\n"))
