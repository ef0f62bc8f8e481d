"""Every reader of the component's outputs goes through common/outputs.py: outside it, no product module
reads `ssh_endpoint`, and the stack-view readers (scripts/watch, the supervisor, stackview/) read no output
record by a bare key. An AST walk, so a comment or a docstring does not count and a new bare read fails."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("bench", "components", "forecast", "harness", "ops", "policy", "providers", "report", "scripts",
           "stackconfig", "stackview", "supervisor", "train", "watch", "emulator", "facts")  # fmt: skip
VIEW_READERS = ("stackview", "supervisor", "watch")
# Keys of the component's output records (common/outputs.py) that the stack-view readers must not index.
RECORD_KEYS = frozenset({"ssh_endpoint", "billed_ids", "cluster_id", "volume_id", "forecast", "run_cost_usd"})
# Reads of the same names that are not the component's records, each with its reason.
ALLOWED = {
    # replace_urns reads an InstantCluster resource's own `cluster_id` in the exported state (the provider's
    # output, providers/runpod/cluster.py), not the component's billed_ids.
    ("supervisor/act.py", "cluster_id"),
}


def _modules(packages: tuple[str, ...]) -> Iterator[Path]:
    for package in packages:
        yield from sorted((REPO / package).rglob("*.py"))


def _key_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, key) of each `x["key"]` and `x.get("key", ...)` with a constant string key."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        else:
            continue
        if isinstance(key, str):
            yield node.lineno, key


def test_no_module_outside_common_spells_the_ssh_endpoint_key() -> None:
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in [*_modules(PRODUCT), REPO / "__main__.py"]
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and node.value == "ssh_endpoint"
    ]
    assert found == [], "parse nodes with common.outputs.NodeOutput (its `ssh` is the parsed target)"


def test_no_module_outside_common_spells_a_type_token() -> None:
    token = re.compile(r"pulumi-python:dynamic/\w+:\w+|trainstack:index:\w+")
    found = [
        f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}"
        for path in [*_modules(PRODUCT), REPO / "__main__.py"]
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and token.fullmatch(node.value)
    ]
    assert found == [], "compare against common.contract (POD.type, ..., COMPONENT_TYPE)"


def test_the_stack_view_readers_read_no_output_record_by_a_bare_key() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} [{key!r}]"
        for path in [*_modules(VIEW_READERS), REPO / "__main__.py"]
        for line, key in _key_reads(ast.parse(path.read_text(), str(path)))
        if key in RECORD_KEYS and (str(path.relative_to(REPO)), key) not in ALLOWED
    ]
    assert found == [], "read them through common.outputs (nodes_of, BilledIds, forecast_of)"


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('host = node["ssh_endpoint"]\n', True),
        ('ids = outputs.get("cluster_id")\n', True),
        ('fc = outputs.get("forecast") or {}\n', True),
        ("ids = billed_ids(outputs).cluster_id\n", False),
        ('row = state.get("nodes")\n', False),  # the aggregator's own rows, not a record key
    ],
)
def test_the_walk_can_fail(source: str, caught: bool) -> None:
    keys = {key for _line, key in _key_reads(ast.parse(source))}
    assert bool(keys & RECORD_KEYS) is caught
