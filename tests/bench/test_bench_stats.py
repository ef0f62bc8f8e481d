"""Pure helpers of scripts/bench: spreads, fits, scale conversion, counter diffs, tables."""

from __future__ import annotations

import pytest

from bench.stats import at_scale_one, counter_diff, linear_fit, spread, table, totals


def test_spread_and_text() -> None:
    s = spread([3.0, 1.0, 2.0])
    assert (s.median, s.low, s.high, s.runs) == (2.0, 1.0, 3.0, 3)
    assert s.text() == "2.0 [1.0, 3.0]" and spread([4.0]).text() == "4.0"
    with pytest.raises(ValueError):
        spread([])


def test_linear_fit_exact_and_noisy() -> None:
    fit = linear_fit([1, 2, 3], [3, 5, 7])
    assert fit.slope == pytest.approx(2) and fit.intercept == pytest.approx(1) and fit.r2 == pytest.approx(1)
    assert linear_fit([1, 2, 3, 4], [1, 3, 2, 4]).r2 < 1
    with pytest.raises(ValueError):
        linear_fit([1, 1], [2, 3])


def test_scale_conversion() -> None:
    assert at_scale_one(wall_s=20, fixed_s=10, scale=20) == 210
    assert at_scale_one(wall_s=5, fixed_s=10, scale=20) == 10


def test_counter_diff_and_totals() -> None:
    before = {"GET /v2/pods/{id}": {"200": 2}}
    after = {"GET /v2/pods/{id}": {"200": 5, "429": 1}, "POST /v2/pods": {"201": 1}}
    diff = counter_diff(before, after)
    assert diff == {"GET /v2/pods/{id}": {"200": 3, "429": 1}, "POST /v2/pods": {"201": 1}}
    assert totals(diff) == {"total": 5, "429": 1, "polls": 4}


def test_table() -> None:
    assert table(["a", "b"], [[1, 2]]).splitlines() == ["| a | b |", "| --- | ---: |", "| 1 | 2 |"]
