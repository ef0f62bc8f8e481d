"""Forecast of a training run before it is rented: memory per GPU, FLOPs and hours, and what the run costs.

Pure: no Pulumi, no I/O. The computation (`model`, `memory`, `fixes`, `compute`) imports the standard library,
this package and the error root (`common.errors`) only; `forecast.stack` builds its input from a parsed stack
config and `forecast.cli`/`forecast.table` print it, so the package as a whole reads `facts/`, `stackconfig/`
and `common/` and nothing above them (the layers contract in pyproject.toml). Build a `ForecastInput`
(`forecast.model` documents every field and its unit) and call `forecast(...)`. The formulas and their
sources are written out in `forecast.memory` (ZeRO's model states, Korthikanti et al.'s activations) and
`forecast.compute` (Kaplan's 6·N·T, LoRA's FLOPs, MFU, restarts, cost); docs/FORECAST.md collects them.
"""

from __future__ import annotations

from forecast.compute import ForecastError, forecast
from forecast.model import (
    ComputeForecast,
    CostForecast,
    Deployment,
    Forecast,
    ForecastInput,
    Hardware,
    MemoryForecast,
    Workload,
)

__all__ = [
    "ComputeForecast",
    "CostForecast",
    "Deployment",
    "Forecast",
    "ForecastError",
    "ForecastInput",
    "Hardware",
    "MemoryForecast",
    "Workload",
    "forecast",
]
