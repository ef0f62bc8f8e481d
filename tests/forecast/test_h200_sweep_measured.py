"""The H200 sweep of issue #44 holds: every recorded run's forecast stays where docs/FORECAST.md publishes it.

docs/gpu-validation/2026-12-03-h200-sweep (66 runs, widths 1024-8192, full and LoRA, checkpointed or not;
bench/gpu_sweep.py) against forecast/step.py's constants, fitted to them by bench/fit_sweep.py. Each row's
ratios are pinned to ±0.02 of the table, so a change of the model that moves a run shows here; the runs
outside the issue's targets are listed by name (EXCEPTIONS), so one more cannot slip out unseen.
"""

from __future__ import annotations

import pytest

from bench.fit_sweep import (
    EARLIER_SHAPES,
    SHAPES,
    earlier_runs,
    fit,
    forecast_step,
    h200,
    held_out,
    host_seconds,
    kernel_counts,
    name,
    sweep_runs,
    workload,
)
from forecast.memory import memory
from forecast.step import HOST_KERNELS, HOST_SECONDS, STEP_CONSTANTS, step_parts

# One row a run of docs/gpu-validation/2026-12-03-h200-sweep: (run id call.index, name, measured tokens/s,
# measured/forecast tokens/s fitted and held out, host-bound, measured peak GB (max_memory_allocated +
# the CUDA context), forecast upper end / measured), from bench/fit_sweep.py on 2026-12-03.
TABLE = [
    ("1.0", "4096-full-nockpt-b2-s2048", 43290, 1.036, 1.039, False, 37.18, 1.129),
    ("1.1", "1024-full-nockpt-b16-s1024", 248904, 1.001, 0.980, False, 17.20, 1.080),
    ("1.2", "8192-full-ckpt-b2-s4096", 24723, 0.966, 0.951, False, 64.13, 1.163),
    ("1.3", "2048-lora-ckpt-b1-s8192", 86834, 0.945, 0.939, False, 15.28, 1.089),
    ("1.4", "5120-full-nockpt-b2-s2048", 56005, 1.023, 1.023, False, 23.75, 1.100),
    ("1.5", "3072-full-ckpt-b16-s1024", 73151, 0.977, 0.975, False, 42.48, 1.140),
    ("1.6", "6144-lora-nockpt-b4-s2048", 103249, 1.035, 1.033, False, 11.06, 1.137),
    ("1.7", "4096m-full-nockpt-b4-s2048", 70083, 1.005, 1.006, False, 26.55, 1.093),
    ("1.8", "1024-lora-ckpt-b2-s8192", 139340, 0.983, 0.975, False, 7.88, 1.079),
    ("1.9", "8192-lora-nockpt-b1-s8192", 42174, 0.994, 0.968, False, 28.24, 1.123),
    ("1.10", "2048-full-nockpt-b4-s2048", 106811, 1.018, 1.016, False, 28.30, 1.115),
    ("1.11", "4096-lora-ckpt-b8-s2048", 50724, 1.014, 1.014, False, 30.81, 1.095),
    ("1.12", "6144-full-ckpt-b4-s4096", 64753, 0.948, 0.947, False, 25.00, 1.102),
    ("1.13", "3072-lora-nockpt-b1-s8192", 88973, 1.028, 1.033, False, 20.63, 1.111),
    ("1.14", "5120-lora-ckpt-b1-s8192", 54014, 1.024, 1.034, False, 7.06, 1.078),
    ("1.15", "4096m-lora-ckpt-b4-s2048", 61399, 1.031, 1.033, False, 6.63, 1.077),
    ("1.16", "1024-full-ckpt-b8-s4096", 199870, 1.009, 0.990, False, 16.99, 1.127),
    ("1.17", "2048-full-ckpt-b8-s2048", 101046, 0.998, 1.001, False, 36.82, 1.128),
    ("1.18", "8192-full-nockpt-b1-s2048", 19418, 1.086, 1.116, False, 61.95, 1.096),
    ("1.19", "4096-full-ckpt-b4-s4096", 44585, 0.973, 0.973, False, 51.97, 1.159),
    ("1.20", "3072-full-nockpt-b2-s4096", 74855, 1.005, 1.005, False, 34.93, 1.122),
    ("1.21", "6144-full-nockpt-b1-s4096", 64711, 1.008, 1.009, False, 21.36, 1.112),
    ("1.22", "5120-full-ckpt-b8-s2048", 54479, 0.959, 0.960, False, 26.11, 1.128),
    ("1.23", "1024-lora-nockpt-b4-s2048", 158806, 1.192, 1.192, True, 7.78, 1.079),
    ("1.24", "2048-lora-nockpt-b8-s1024", 128170, 1.031, 1.037, False, 18.99, 1.102),
    ("1.25", "4096-lora-nockpt-b4-s1024", 63626, 1.005, 1.004, False, 14.67, 1.108),
    ("1.26", "8192-lora-ckpt-b8-s2048", 32314, 0.918, 0.892, False, 34.86, 1.095),
    ("1.27", "4096m-full-ckpt-b1-s8192", 52235, 0.990, 0.988, False, 19.55, 1.115),
    ("1.28", "3072-lora-ckpt-b4-s2048", 75084, 0.989, 0.990, False, 16.21, 1.090),
    ("1.29", "5120-lora-nockpt-b2-s4096", 81694, 1.085, 1.090, False, 12.91, 1.100),
    ("1.30", "6144-lora-ckpt-b16-s1024", 75698, 0.995, 0.994, False, 10.93, 1.028),
    ("1.31", "4096-full-nockpt-b1-s8192", 47092, 1.010, 1.011, False, 47.63, 1.124),
    ("1.32", "1024-full-nockpt-b1-s1024", 30752, 1.025, 1.027, True, 4.09, 1.061),
    ("1.33", "2048-full-nockpt-b1-s4096", 90387, 1.018, 1.005, False, 19.78, 1.120),
    ("1.34", "8192-full-nockpt-b4-s1024", 24901, 1.014, 1.020, False, 62.73, 1.134),
    ("1.35", "4096-full-ckpt-b16-s1024", 46236, 0.971, 0.971, False, 51.97, 1.159),
    ("1.36", "2048-full-ckpt-b2-s8192", 94124, 1.007, 1.000, False, 36.83, 1.128),
    ("1.37", "8192-full-ckpt-b1-s8192", 23952, 0.962, 0.946, False, 64.15, 1.162),
    ("1.38", "1024-full-ckpt-b16-s1024", 186169, 0.879, 0.859, False, 9.99, 1.128),
    ("1.39", "3072-full-ckpt-b1-s8192", 62028, 0.991, 0.993, False, 29.23, 1.156),
    ("2.0", "2048-full-nockpt-b1-s1024", 35816, 0.974, 0.950, True, 13.36, 1.131),
    ("2.1", "2048-lora-nockpt-b1-s1024", 34393, 1.046, 1.046, True, 4.53, 1.071),
    ("2.2", "2048-lora-ckpt-b1-s1024", 21171, 1.065, 1.065, True, 4.06, 1.063),
    ("2.3", "3072-full-nockpt-b1-s1024", 32384, 1.067, 1.060, True, 19.94, 1.091),
    ("2.4", "3072-lora-nockpt-b1-s1024", 31163, 0.948, 0.948, True, 5.47, 1.079),
    ("2.5", "4096m-full-nockpt-b1-s1024", 32886, 1.029, 1.023, True, 18.03, 1.090),
    ("2.6", "4096m-lora-ckpt-b1-s1024", 17394, 0.875, 0.875, True, 3.52, 1.058),
    ("2.7", "5120-lora-nockpt-b1-s1024", 38650, 0.890, 0.890, True, 4.67, 1.071),
    ("2.8", "5120-full-ckpt-b1-s1024", 26630, 1.104, 1.104, True, 21.37, 1.091),
    ("2.9", "6144-lora-nockpt-b1-s1024", 57537, 0.897, 0.897, True, 4.24, 1.079),
    ("2.10", "8192-lora-nockpt-b1-s1024", 40054, 1.048, 1.077, False, 11.03, 1.094),
    ("2.11", "8192-full-ckpt-b1-s1024", 12120, 1.115, 1.168, False, 61.91, 1.097),
    ("2.12", "1024-lora-nockpt-b1-s1024", 16291, 0.978, 0.978, True, 2.09, 1.008),
    ("2.13", "1024-lora-ckpt-b4-s1024", 36289, 0.898, 0.898, True, 2.90, 1.045),
    ("2.14", "1024-full-ckpt-b1-s2048", 31256, 0.976, 0.977, True, 3.97, 1.103),
    ("2.15", "1024-full-nockpt-b4-s1024", 108239, 0.902, 0.904, True, 6.74, 1.067),
    ("2.16", "4096-full-nockpt-b2-s2048", 43266, 1.036, 1.038, False, 37.18, 1.129),
    ("2.17", "1024-lora-nockpt-b4-s2048", 137299, 1.030, 1.030, True, 7.78, 1.079),
    ("2.18", "1024d-full-nockpt-b4-s2048", 84463, 1.000, 1.002, True, 20.77, 1.076),
    ("2.19", "1024d-lora-nockpt-b4-s2048", 47120, 1.052, 1.052, True, 15.03, 1.085),
    ("2.20", "1024d-lora-ckpt-b1-s1024", 3728, 1.096, 1.096, True, 2.19, 1.019),
    ("2.21", "2048d-full-ckpt-b4-s2048", 35111, 0.998, 0.997, False, 33.64, 1.192),
    ("2.22", "2048d-lora-nockpt-b1-s1024", 8442, 1.008, 1.008, True, 7.63, 1.089),
    ("2.23", "2048d-full-nockpt-b2-s2048", 37806, 1.023, 1.014, False, 36.79, 1.115),
    ("2.24", "4096-lora-nockpt-b1-s2048", 61061, 1.014, 1.014, False, 9.73, 1.098),
    ("2.25", "6144-full-nockpt-b2-s1024", 52928, 1.048, 1.052, False, 19.70, 1.089),
]

# Outside the targets (tokens/s fitted within 10 %, held out within 15 %), published in docs/FORECAST.md:
# held out, 1024-lora-nockpt-b4-s2048 (its repeat in call 2, 2.17, reads 1.03: the host's speed between calls)
# and 8192-full-ckpt-b1-s1024; fitted only, six host-bound or 1,024-token runs at 0.88-0.90 or 1.10-1.12.
EXCEPTIONS = {
    "1024-lora-nockpt-b4-s2048",
    "8192-full-ckpt-b1-s1024",
    "1024-full-ckpt-b16-s1024",
    "4096m-lora-ckpt-b1-s1024",
    "5120-lora-nockpt-b1-s1024",
    "5120-full-ckpt-b1-s1024",
    "6144-lora-nockpt-b1-s1024",
    "1024-lora-ckpt-b4-s1024",
}
PINNED = 0.02


def _runs() -> dict[str, dict[str, object]]:
    return {f"{r['call']}.{r['index']}": r for r in sweep_runs()}


def test_the_table_is_every_recorded_run() -> None:
    runs = _runs()
    assert sorted(runs) == sorted(row[0] for row in TABLE)
    for key, label, tokens, *_ in TABLE:
        assert name(runs[key]) == label
        assert round(float(runs[key]["tokens_per_s"])) == tokens  # type: ignore[arg-type]


@pytest.mark.parametrize("row", TABLE, ids=[row[1] for row in TABLE])
def test_a_recorded_runs_speed_stays_where_published(row: tuple[object, ...]) -> None:
    key, label, _, fitted, _, host, *_ = row
    r = _runs()[str(key)]
    ratio = float(r["step_s"]) / forecast_step(r, STEP_CONSTANTS)  # type: ignore[arg-type]
    ratio = 1.0 / ratio  # measured / forecast tokens/s
    assert ratio == pytest.approx(fitted, abs=PINNED)
    parts = step_parts(workload(r, SHAPES), h200())
    assert (parts.latency > 0) == host
    if label not in EXCEPTIONS:
        assert 0.90 <= ratio <= 1.10


@pytest.mark.parametrize("row", TABLE, ids=[row[1] for row in TABLE])
def test_a_recorded_runs_peak_is_inside_the_band_and_near_its_top(row: tuple[object, ...]) -> None:
    key, _, _, _, _, _, measured, published = row
    r = _runs()[str(key)]
    high = memory(workload(r, SHAPES), h200(), 1).total_high
    assert high / float(measured) == pytest.approx(published, abs=PINNED)  # type: ignore[arg-type]
    assert 1.00 <= high / float(measured) <= 1.20  # type: ignore[arg-type]


def test_the_earlier_full_depth_runs_never_fitted_hold() -> None:
    """docs/gpu-validation/2026-12-01-h200-lora*: 27 full and LoRA runs of 16-32 layers, 1.5B-8B."""
    runs = earlier_runs()
    assert len(runs) == 27
    for r in runs:
        w = workload(r, EARLIER_SHAPES)
        ratio = forecast_step(r, STEP_CONSTANTS, EARLIER_SHAPES) / float(r["step_s"])
        assert 0.95 <= ratio <= 1.15, (r["shape"], r["mode"], r["ckpt"], r["b"])
        measured = (float(r["alloc"]) + float(r.get("context", 0.8e9))) / 1e9
        assert 1.00 <= memory(w, h200(), 1).total_high / measured <= 1.20


@pytest.mark.slow
def test_the_constants_are_the_fit_and_the_held_out_column_is_reproduced() -> None:
    runs = sweep_runs()
    fitted = fit(runs, {"elementwise": 1.0})
    for k, v in STEP_CONSTANTS.items():
        assert v == pytest.approx(fitted[k], rel=0.01), k
    held = held_out(runs, {"elementwise": 1.0})
    by_key = {f"{r['call']}.{r['index']}": r for r in runs}
    for key, label, _, _, published, *_ in TABLE:
        r = by_key[str(key)]
        ratio = held[str(key)] / float(r["step_s"])  # type: ignore[arg-type]
        assert ratio == pytest.approx(published, abs=PINNED), label
        if label not in EXCEPTIONS:
            assert 0.85 <= ratio <= 1.15, label


def test_the_host_constants_are_the_host_calls_readings() -> None:
    """HOST_KERNELS and HOST_SECONDS are bench.fit_sweep's fit to docs/gpu-validation/2026-12-03-h200-host
    (the kernels of the 1024-wide runs over their depths; the host's time over all 28 readings)."""
    for key, (fixed, per_layer) in kernel_counts().items():
        assert HOST_KERNELS[key] == pytest.approx((fixed, per_layer), abs=0.06), key
    for key, seconds in host_seconds().items():
        assert HOST_SECONDS[key] == pytest.approx(seconds, rel=1e-3), key
