"""The doors, held: one stack-file reader (stackconfig/files.py), one Pulumi CLI runner and one reader of
`pulumi config --json` (common/pulumi.py), one workspace rule (ops/workspace.py).

An AST scan of every module we ship (not tests/): it fails on a list or call that starts a `pulumi` command
(`["pulumi", ...]`), on a `"config", "--json"` pair, on a stack file's path built by hand
(`f"Pulumi.{stack}.yaml"`, `"Pulumi.*.yaml"`), on the local workspaces' folder or its variable spelled
outside the workspace rule, and on the Automation API anywhere (the supervisor acts through the runner too:
one door, not two). Each check is proven able to fail on a sample of the code it forbids."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {".venv", ".git", ".state", "tests", "out", "node_modules", "__pycache__"}

PULUMI_DOOR = "common/pulumi.py"
STACK_FILE_DOOR = "stackconfig/files.py"
WORKSPACE_DOOR = "ops/workspace.py"


def shipped() -> Iterator[Path]:
    for path in sorted(REPO.rglob("*.py")):
        if not SKIPPED_DIRS.intersection(path.relative_to(REPO).parts):
            yield path


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


_RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "execvp", "execvpe", "execv", "execve"}


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _argvs(tree: ast.AST) -> Iterator[tuple[int, list[ast.expr]]]:
    """Where an argv is written: every list literal (but a message's `" ".join([...])`), and the positional
    arguments of a call that starts a process."""
    joined = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) == "join"
        for arg in node.args
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.List) and id(node) not in joined:
            yield node.lineno, list(node.elts)
        elif isinstance(node, ast.Tuple) and len(node.elts) > 1 and _constant(node.elts[1]) is not None:
            yield node.lineno, list(node.elts)  # ("pulumi", "up"), not a pair like (rss, "pulumi")
        elif isinstance(node, ast.Call) and _name(node.func) in _RUNNERS:
            yield node.lineno, list(node.args)


def runs_pulumi(tree: ast.AST) -> list[str]:
    found = []
    for line, items in _argvs(tree):
        if items and _constant(items[0]) == "pulumi":
            found.append(f"line {line}: an argv that starts with 'pulumi'")
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Call):
            items = list(node.elts) if isinstance(node, ast.List | ast.Tuple) else list(node.args)
            for first, second in itertools.pairwise(items):
                if (_constant(first), _constant(second)) == ("config", "--json"):
                    found.append(f"line {node.lineno}: `pulumi config --json` read by hand")
    return found


def builds_stack_paths(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and len(node.values) >= 3:
            head, tail = _constant(node.values[0]), _constant(node.values[-1])
            if head is not None and tail == ".yaml" and head.endswith("Pulumi."):
                found.append(f"line {node.lineno}: a stack file's path built by hand")
        globbed = isinstance(node, ast.Call) and _name(node.func) in ("glob", "rglob", "iglob")
        if globbed and any("Pulumi." in (_constant(arg) or "") for arg in node.args):  # type: ignore[attr-defined]
            found.append(f"line {node.lineno}: the stack files globbed by hand")
    return found


def spells_workspaces(tree: ast.AST) -> list[str]:
    """The rule's variable read (`.get(...)`, `[...]`) or its folder built, outside the rule."""
    found = []
    for node in ast.walk(tree):
        read = (
            isinstance(node, ast.Call) and _name(node.func) in ("get", "getenv") and node.args
        ) and node.args[0]
        if isinstance(node, ast.Subscript):
            read = node.slice
        if read and _constant(read) == "TRAINSTACK_LOCAL_WORKSPACES":
            found.append(f"line {node.lineno}: TRAINSTACK_LOCAL_WORKSPACES read outside the rule")
        divided = (
            isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp)
        )
        if divided and _constant(node.right) == "local" and _constant(node.left.right) == ".state":  # type: ignore[attr-defined]
            found.append(f"line {node.lineno}: the local workspaces' folder spelled outside the rule")
    return found


def uses_automation(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "pulumi"
            and any(a.name == "automation" for a in node.names)
        ):
            found.append(f"line {node.lineno}: the Automation API")
        if isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n.startswith("pulumi.automation") for n in names):
                found.append(f"line {node.lineno}: the Automation API")
    return found


def _violations() -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for path in shipped():
        name = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(), filename=name)
        found = []
        if name != PULUMI_DOOR:
            found += runs_pulumi(tree)
        if name != STACK_FILE_DOOR:
            found += builds_stack_paths(tree)
        if name != WORKSPACE_DOOR:
            found += spells_workspaces(tree)
        found += uses_automation(tree)
        if found:
            seen[name] = found
    return seen


def test_nothing_goes_around_a_door() -> None:
    assert _violations() == {}


def test_the_scan_sees_the_code() -> None:
    names = {p.relative_to(REPO).as_posix() for p in shipped()}
    assert {PULUMI_DOOR, STACK_FILE_DOOR, WORKSPACE_DOOR, "ops/cli.py", "__main__.py"} <= names
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.parametrize(
    ("check", "sample"),
    [
        (runs_pulumi, 'subprocess.run(["pulumi", "stack", "output", "--json"])'),
        (runs_pulumi, 'os.execvp("pulumi", argv)'),
        (runs_pulumi, 'argv = ("pulumi", "up")'),
        (runs_pulumi, 'run_json(stack, cwd, "config", "--json")'),
        (builds_stack_paths, 'yaml.safe_load((stacks / f"Pulumi.{stack}.yaml").read_text())'),
        (builds_stack_paths, 'stacks.glob("Pulumi.*.yaml")'),
        (spells_workspaces, 'os.environ.get("TRAINSTACK_LOCAL_WORKSPACES")'),
        (spells_workspaces, 'root = REPO / ".state" / "local"'),
        (uses_automation, "from pulumi import automation as auto"),
        (uses_automation, "import pulumi.automation"),
    ],
)
def test_each_check_can_fail(check: object, sample: str) -> None:
    assert callable(check)
    assert check(ast.parse(sample)), f"{check} let through: {sample}"


@pytest.mark.parametrize(
    "sample",
    [
        'pulumi.run(["stack", "output", "--json"], stack=stack, cwd=cwd)',
        'say(f"no stack (stacks/Pulumi.{stack}.yaml); choose one of")',
        'files.stack_path(stack, root / "stacks")',
        'message = " ".join(["pulumi", verb, *extra])',
        'version = _version("pulumi")',
        'env = {"TRAINSTACK_LOCAL_WORKSPACES": str(root / "ws")}',
    ],
)
def test_the_doors_themselves_pass(sample: str) -> None:
    tree = ast.parse(sample)
    assert not (
        runs_pulumi(tree) + builds_stack_paths(tree) + spells_workspaces(tree) + uses_automation(tree)
    )
