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
    assert (
        f"{mem['total']:.1f} of {mem['gpu']:g} GB per GPU "
        f"(band {mem['total_low']:.1f}-{mem['total_high']:.1f})" in row
    )
    assert f"{out['hours']:.2f} h (max_run_hours {out['max_run_hours']:g}: {out['restarts']} restarts)" in row
    assert f"${out['run_cost_usd']:,.2f} a run" in row


def test_the_docs_cheapest_feasible_figures_match_the_shipped_stacks() -> None:
    from forecast.compare import compare

    text = (REPO / "docs/FORECAST.md").read_text().replace("\n", " ")
    for stack in ("prod", "search", "dev"):
        result = compare(stack_config(stack))
        assert result is not None and result.cheapest is not None
        best = result.cheapest
        shape = f"{best.nodes} x {best.gpus_per_node} {best.gpu}, {best.sharding}"
        assert f"`{shape} ${best.run_usd:,.2f} (-${result.saving_usd:,.2f})`" in text, stack
