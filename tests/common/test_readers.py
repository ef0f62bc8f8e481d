"""Every reader of the component's outputs goes through common/outputs.py: outside it, no product module
reads `ssh_endpoint`, the stack-view readers (scripts/watch, the supervisor, stackview/) read no output
record by a bare key, and the policy pack and the preview report read no forecast figure by one (they parse
the forecast into ForecastOutput once). An AST walk, so a comment or a docstring does not count and a new
bare read fails."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.outputs import MEMORY_PARTS, ForecastMemory, ForecastOutput

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
    ("supervisor/recoverer.py", "cluster_id"),
}


FORECAST_READERS = ("policy", "report")
# Every key of the forecast record and of its memory breakdown (common/outputs.py), derived from the types.
FORECAST_KEYS = frozenset(
    {f.name for f in dataclasses.fields(ForecastOutput) if f.name != "memory"}
    | {f.name for f in dataclasses.fields(ForecastMemory) if f.name != "parts"}
    | {"memory_gb_per_gpu", *MEMORY_PARTS}
)
# Reads in policy/ and report/ of the same names that are not the forecast's, each with its reason.
FORECAST_ALLOWED = {
    # a pod's or cluster's own `training.max_run_hours` input, and the stack config's (not the forecast's)
    ("policy/rules/budget.py", "max_run_hours"),
    ("policy/rules/capacity.py", "max_run_hours"),
    ("report/parse.py", "max_run_hours"),
    # forecast.compare's summary of its cheapest feasible shape (ForecastOutput.compare, a map of its own)
    ("report/forecast.py", "run_cost_usd"),
    ("report/forecast.py", "gpu"),
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


def _figure_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """_key_reads, and the policy pack's own reader: each constant key of `read(x, "key", ...)`."""
    yield from _key_reads(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "read":
            for arg in node.args[1:]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield node.lineno, arg.value


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


def test_the_policy_pack_and_the_report_read_no_forecast_figure_by_a_bare_key() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} [{key!r}]"
        for path in _modules(FORECAST_READERS)
        for line, key in _figure_reads(ast.parse(path.read_text(), str(path)))
        if key in FORECAST_KEYS and (str(path.relative_to(REPO)), key) not in FORECAST_ALLOWED
    ]
    assert found == [], "parse the forecast once with common.outputs.ForecastOutput and read its fields"


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('cost = number(read(fc, "run_cost_usd"))\n', True),
        ('low = mem.get("total_low")\n', True),
        ('hours = forecast["hours"]\n', True),
        ('parts = read(fc, "memory_gb_per_gpu", "weights")\n', True),
        ("cost = fc.run_cost_usd\n", False),
        ('value = read(res.props, "forecast")\n', False),  # the record itself, parsed next
    ],
)
def test_the_forecast_walk_can_fail(source: str, caught: bool) -> None:
    keys = {key for _line, key in _figure_reads(ast.parse(source))}
    assert bool(keys & FORECAST_KEYS) is caught


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
