"""docs/FORECAST.md's table of the shipped stacks shows what the forecast computes for them today."""

from __future__ import annotations

import pytest

from forecast.stack import stack_forecast
from tests.components.conftest import REPO, stack_config


@pytest.mark.parametrize("stack", ["dev", "search", "prod"])
def test_the_docs_table_matches_the_shipped_stacks(stack: str) -> None:
    result = stack_forecast(stack_config(stack))
    assert result is not None
    out = result.to_output()
    row = next(
        line
        for line in (REPO / "docs/FORECAST.md").read_text().splitlines()
        if line.startswith(f"| `{stack}` |")
    )
    mem = out["memory_gb_per_gpu"]
    assert f"{mem['total']:.1f} of {mem['gpu']:g} GB per GPU" in row
    assert f"{out['hours']:.2f} h (max_run_hours {out['max_run_hours']:g}: {out['restarts']} restarts)" in row
    assert f"${out['run_cost_usd']:,.2f} a run" in row
