"""The doors, held: one stack-file reader (stackconfig/files.py), one client for a stack (common/stack.py,
on the one Pulumi CLI runner and reader of `pulumi config --json`, common/pulumi.py), one workspace rule
(ops/workspace.py).

An AST scan of every module we ship (not tests/): it fails on a list or call that starts a `pulumi` command
(`["pulumi", ...]`), on a `"config", "--json"` pair, on the runner called (`pulumi.run`, `run_json`,
`command`, `config`, `config_entries`) or a stack's export or outputs named (`"stack", "export"`) anywhere
but the client, on a stack file's path built by hand (`f"Pulumi.{stack}.yaml"`, `"Pulumi.*.yaml"`), on the
local workspaces' folder or its variable spelled outside the workspace rule, and on the Automation API
anywhere (the supervisor acts through the client too: one door, not two). A line scan of every shell script
(scripts/, bench/gpu/*.sh, .ci/) and CI workflow (.github/workflows/) fails on a `pulumi VERB` run there
(`trainstack pulumi`/scripts/pulumi is the user's own passthrough, not a workflow's). Each check is proven
able to fail on a sample of the code it forbids (issue #64)."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {".venv", ".git", ".state", "tests", "out", "node_modules", "__pycache__"}

PULUMI_DOOR = "common/pulumi.py"
STACK_DOOR = "common/stack.py"
NOT_YET_ON_THE_CLIENT: set[str] = set()  # every module is on the client (issue #64); nothing may join
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


_RUNNER = {"run", "run_json", "command", "config", "config_entries"}
_STATE_READS = {("stack", "export"), ("stack", "output"), ("stack", "import")}


def goes_around_the_client(tree: ast.AST) -> list[str]:
    """The runner of common/pulumi.py called, or a stack's export or outputs named, outside the client."""
    found = []
    aliases = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "common"
        for a in node.names
        if a.name == "pulumi"
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "common.pulumi":
            taken = sorted(a.name for a in node.names if a.name in _RUNNER)
            if taken:
                found.append(
                    f"line {node.lineno}: the runner imported ({', '.join(taken)}): use common/stack.py"
                )
        func = node.func if isinstance(node, ast.Call) else None
        named = (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in aliases
        )
        if named and isinstance(func, ast.Attribute) and func.attr in _RUNNER:
            found.append(f"line {node.lineno}: pulumi.{func.attr} outside the client (common/stack.py)")
        if isinstance(node, ast.List | ast.Tuple | ast.Call):
            items = list(node.elts) if isinstance(node, ast.List | ast.Tuple) else list(node.args)
            for first, second in itertools.pairwise(items):
                if (_constant(first), _constant(second)) in _STATE_READS:
                    found.append(f"line {node.lineno}: `pulumi stack {_constant(second)}` outside the client")
    return found


SHELL_DIRS = ("scripts", ".ci")
# `pulumi VERB` as a command: at a line's start or after a shell operator, not in a comment or a step's name.
_SHELL_PULUMI = re.compile(
    r"(^|[;&|(`]|\$\(|\bthen|\bdo|\bexec)\s*pulumi\s+(up|preview|refresh|destroy|stack|config|cancel|state|"
    r"import|login|new|watch)\b"
)


def shells_and_workflows() -> Iterator[Path]:
    for folder in SHELL_DIRS:
        for path in sorted((REPO / folder).iterdir()) if (REPO / folder).is_dir() else ():
            if path.is_file() and path.suffix != ".py" and path.name != "bootstrap":
                yield path
    yield from sorted((REPO / "bench" / "gpu").glob("*.sh"))
    yield from sorted((REPO / ".github" / "workflows").glob("*.yml"))


def runs_pulumi_in_shell(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith(("#", "- name:", "name:")):
            continue
        if _SHELL_PULUMI.search(code.strip()):
            found.append(f"line {number}: `{code.strip()[:60]}` runs the Pulumi CLI outside the client")
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
        if name not in (PULUMI_DOOR, STACK_DOOR, *NOT_YET_ON_THE_CLIENT):
            found += goes_around_the_client(tree)
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


def test_no_shell_script_or_workflow_runs_the_pulumi_cli() -> None:
    seen = {
        p.relative_to(REPO).as_posix(): runs_pulumi_in_shell(p.read_text()) for p in shells_and_workflows()
    }
    assert {"scripts/up", ".github/workflows/deploy-stack.yml"} <= seen.keys()  # the scan sees them
    assert {name: found for name, found in seen.items() if found} == {}


@pytest.mark.parametrize(
    "sample",
    [
        '          pulumi up --stack "$STACK" --yes --non-interactive \\',
        "x=$(pulumi stack output --json)",
        "if ok; then pulumi destroy --yes; fi",
        "exec pulumi refresh",
    ],
)
def test_the_shell_scan_can_fail(sample: str) -> None:
    assert runs_pulumi_in_shell(sample), sample


@pytest.mark.parametrize(
    "sample",
    [
        "      - name: pulumi up",
        "# `pulumi up` each stack in turn",
        "      group: pulumi-up-${{ inputs.stack }}",
        '          scripts/up "$STACK" --yes',
        'exec "$(dirname "${BASH_SOURCE[0]}")/trainstack" pulumi "$@"',
    ],
)
def test_the_shell_scan_passes_what_is_no_run(sample: str) -> None:
    assert not runs_pulumi_in_shell(sample), sample


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
        (goes_around_the_client, 'from common import pulumi\npulumi.run(["up"], stack=s, cwd=w)'),
        (goes_around_the_client, 'from common import pulumi as cli\nargv = cli.command(["up"])'),
        (goes_around_the_client, "from common.pulumi import run_json"),
        (goes_around_the_client, 'json.loads(cli.run("stack", "export").stdout)'),
        (goes_around_the_client, 'self.cli.run("stack", "output", "--json", "--stack", STACK)'),
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
        "Stack(stack, cwd).outputs()",
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
        + goes_around_the_client(tree)
    )  # fmt: skip
