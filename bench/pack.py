"""Pack a readable Python script into one device command of at most 2000 characters.

The device tool sends the session's own checkout (not a helper's worktree) and takes a command of at most
2000 characters, so a script written for a GPU run travels inside the command. The source stays readable
and checked (ruff, mypy); it is shrunk only at pack time: docstrings, comments and type annotations are
dropped (`ast`, which keeps the program's meaning), the rest is zlib-compressed and base85-coded, and the
command decodes and runs it with python3 on the GPU machine.
"""

from __future__ import annotations

import ast
import base64
import zlib
from pathlib import Path

LIMIT = 2000  # the device tool's limit on one command
NCCL_ENV = "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"  # multicast off


class PackError(ValueError):
    """The packed command is over the limit."""


class _Shrink(ast.NodeTransformer):
    """Drops what does not change what the program does: docstrings and annotations."""

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            body = body[1:] or [ast.Pass()]
        return body

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = self._body(node.body)
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.body = self._body(node.body)
        return self.generic_visit(node)  # type: ignore[return-value]

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.body = self._body(node.body)
        node.returns = None
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            arg.annotation = None
        for extra in (node.args.vararg, node.args.kwarg):
            if extra is not None:
                extra.annotation = None
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._function(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if node.value is None:
            return None  # a bare declaration does nothing at run time
        return ast.copy_location(ast.Assign([node.target], node.value), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        return None if node.module == "__future__" else node


def _drop_unused_imports(tree: ast.Module) -> None:
    """Top-level imports of names the program no longer uses (those its annotations alone used)."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {
        n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }
    kept: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            stmt.names = [a for a in stmt.names if (a.asname or a.name).split(".")[0] in used]
            if not stmt.names:
                continue
        kept.append(stmt)
    tree.body = kept


def shrink(source: str) -> str:
    """The same program without docstrings, comments, annotations and the imports only they used, indented
    by one space a level (a function left empty gets `pass`)."""
    tree = _Shrink().visit(ast.parse(source))
    _drop_unused_imports(tree)
    text = ast.unparse(ast.fix_missing_locations(tree))  # string literals come out on one line each
    lines = []
    for line in text.splitlines():
        body = line.lstrip(" ")
        lines.append(" " * ((len(line) - len(body)) // 4) + body)
    return "\n".join(lines)


def encoded(source: str) -> str:
    return base64.b85encode(zlib.compress(shrink(source).encode(), 9)).decode()


def command(script: Path, prefix: str = "", env: bool = True) -> str:
    """`prefix` (shell, run first), then the script run by python3 (with `env`: multicast off and output
    unbuffered, for a script that does not set them itself). PackError when over LIMIT characters."""
    exports = f"export PYTHONUNBUFFERED=1 {NCCL_ENV};" if env else ""
    text = (
        f"{exports}{prefix}python3 - <<'E'\n"
        f"import base64,zlib;exec(zlib.decompress(base64.b85decode('{encoded(script.read_text())}')))\nE\n"
    )
    if len(text) > LIMIT:
        raise PackError(f"{script.name} packs into {len(text)} characters, over the device tool's {LIMIT}")
    return text
