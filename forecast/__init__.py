"""Forecast of a training run before it is rented: memory per GPU, FLOPs and hours, and what the run costs.

Pure: no Pulumi, no I/O, no imports outside the standard library and this package. Build a `ForecastInput`
(`forecast.model` documents every field and its unit) and call `forecast(...)`; `forecast.stack` builds the
input from a parsed stack config. The formulas and their sources are written out in `forecast.memory`
(ZeRO's model states, Korthikanti et al.'s activations) and `forecast.compute` (Kaplan's 6·N·T, LoRA's
FLOPs, MFU, restarts, cost); docs/FORECAST.md collects them.
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
