"""ops.plan_cost: the cost line scripts/up prints before it asks (from the stack file) and after an up (from
the stack outputs, since Pulumi's own list of outputs is hidden)."""

from __future__ import annotations

import pytest

from ops.plan_cost import cost_line, outputs_line


def test_the_stack_file_line_names_the_hourly_price_and_the_run_cost() -> None:
    line = cost_line("dev")
    assert line.startswith("'dev' costs $"), line
    assert "/h; one run $" in line


def test_the_outputs_line_is_the_stack_outputs_figures() -> None:
    outputs = {"cost_per_hour": 1234.5, "cost_per_run": 6.0, "cost_per_run_basis": "forecast: 0.1 h"}
    assert outputs_line(outputs) == "$1,234.50/h; one run $6.00 (forecast: 0.1 h)"
    assert outputs_line({"cost_per_hour": 1, "cost_per_run": 2}) == "$1.00/h; one run $2.00"


@pytest.mark.parametrize("outputs", [{}, {"cost_per_hour": "1", "cost_per_run": 2}, [1, 2]])
def test_outputs_without_the_figures_are_refused(outputs: object) -> None:
    with pytest.raises(ValueError, match=r"cost_per_hour|JSON object"):
        outputs_line(outputs)  # type: ignore[arg-type]
