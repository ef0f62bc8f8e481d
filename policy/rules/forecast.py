"""Forecast policies: the model fits its GPUs' memory, the run fits the budget and `max_run_hours`.

Memory is judged on the forecast's uncertainty band (docs/FORECAST.md): `model-fits-gpu-memory` (mandatory)
refuses a stack whose band's lower end is over the GPU (it cannot fit); `model-may-not-fit-gpu-memory`
(advisory) warns when only the upper end is ("may not fit: X-Y GB of Z"). A forecast recorded before the
band existed has only `total`, which then stands for both ends.

They read the `forecast` output of the stack's H100Cluster component (forecast.model.Forecast.to_output,
computed from the stack config, so known at preview), parsed once by `forecasts` into common/outputs.py's
`ForecastOutput`; the figures and the fixes are the forecast's own, so the message here and
`scripts/forecast` agree. A forecast that does not parse (a figure missing, not a finite number, or not
known) fails closed: each mandatory policy refuses it with the parser's message, which names the field. A
stack with no `training.model` has no forecast: the mandatory policies pass and the advisory one says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy
from pydantic import Field

from common import contract
from common.outputs import MEMORY_PARTS, ContractError, ForecastOutput
from policy.rules.common import (
    UNFILLED,
    PolicyConfig,
    Resource,
    config_schema,
    load_config,
    read,
    run_cap,
    usd,
)

COMPONENT: Final = contract.COMPONENT_TYPE
_MEMORY_PARTS: Final = MEMORY_PARTS

# A component's forecast: parsed, malformed (the parser's error, naming the field), or None (no model).
Parsed = ForecastOutput | ContractError | None


def _plain(value: Any) -> Any:
    """The forecast as plain maps and lists, a value not known yet as policy.rules.common's UNKNOWN (which
    the parser then names as not a number), so nothing reaches the parser through an unknown-checking
    proxy."""
    if isinstance(value, Mapping):
        return {key: _plain(read(value, key)) for key in list(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def forecasts(resources: Sequence[Resource]) -> list[tuple[Resource, Parsed]]:
    """Each H100Cluster with its forecast parsed once (None: no model section, or not known yet)."""
    found: list[tuple[Resource, Parsed]] = []
    for res in resources:
        if res.resource_type != COMPONENT:
            continue
        value = read(res.props, "forecast")
        if not isinstance(value, Mapping):
            found.append((res, None))
            continue
        try:
            found.append((res, ForecastOutput.from_output(_plain(value))))
        except ContractError as exc:
            found.append((res, exc))
    return found


def memory_breakdown(fc: ForecastOutput) -> str:
    """`weights 14.0 GB + gradients 14.0 GB + ...`, the parts of the per-GPU total."""
    parts = fc.memory.parts
    return " + ".join(
        f"{part.replace('_', ' ')} {f'{parts[part]:.1f} GB' if part in parts else '?'}"
        for part in _MEMORY_PARTS
    )


class MemoryConfig(PolicyConfig):
    min_headroom_gb: float = Field(
        0, ge=0, description="GB per GPU that must stay free beyond the forecast's own allowance."
    )


class MayNotFitConfig(MemoryConfig):
    """The advisory policy's own model (the same keys), so a message about its config names its policy."""


def band(fc: ForecastOutput) -> tuple[float, float, float, float]:
    """(total, low, high, gpu) GB per GPU; low and high are `total` for a forecast without the band."""
    mem = fc.memory
    low = mem.total if mem.total_low is None else mem.total_low
    high = mem.total if mem.total_high is None else mem.total_high
    return mem.total, low, high, mem.gpu


def _fixes(fc: ForecastOutput) -> str:
    fixes = list(fc.fixes)
    cheapest = f" Cheapest fix: {fixes[0]}." if fixes else ""
    others = f" Also: {'; '.join(fixes[1:])}." if len(fixes) > 1 else ""
    return cheapest + others


def check_model_fits(args: StackValidationArgs, report: ReportViolation) -> None:
    """Even the lower end of the forecast per-GPU memory band is over the GPU's memory: it cannot fit."""
    cfg = load_config(MemoryConfig, args.get_config(), report)
    if cfg is None:
        return
    for res, fc in forecasts(args.resources):
        if isinstance(fc, ContractError):  # a model is declared but its forecast does not parse
            _refuse_malformed(res, fc, report)
            continue
        if fc is None:
            continue
        total, low, high, gpu = band(fc)
        if low <= gpu - cfg.min_headroom_gb:
            continue
        kept = f" with {cfg.min_headroom_gb:g} GB kept free" if cfg.min_headroom_gb else ""
        report(
            f"stack '{res.name}': the model needs {total:.1f} GB per GPU ({low:.1f}-{high:.1f} GB with the "
            f"forecast's measured errors; {memory_breakdown(fc)}) but each {fc.gpu} has {gpu:g} GB: "
            f"even the lower end is {low - gpu + cfg.min_headroom_gb:.1f} GB over{kept}.{_fixes(fc)} Change "
            "training.model in stacks/Pulumi.<stack>.yaml; try it first with "
            "`scripts/forecast <stack> --set key=value`.",
            None,
        )


def check_model_may_not_fit(args: StackValidationArgs, report: ReportViolation) -> None:
    """The band's upper end is over the GPU's memory while its lower end fits: the run may not fit."""
    cfg = load_config(MayNotFitConfig, args.get_config(), report)
    if cfg is None:
        return
    for res, fc in forecasts(args.resources):
        if not isinstance(fc, ForecastOutput):  # none, or malformed: the mandatory policies refuse that
            continue
        total, low, high, gpu = band(fc)
        room = gpu - cfg.min_headroom_gb
        if high <= room or low > room:
            continue
        kept = f" with {cfg.min_headroom_gb:g} GB kept free" if cfg.min_headroom_gb else ""
        report(
            f"stack '{res.name}': may not fit: {low:.1f}-{high:.1f} GB per GPU of {gpu:g} on each "
            f"{fc.gpu}{kept} (forecast {total:.1f} GB; the band holds every run measured, "
            "docs/FORECAST.md). An out-of-memory error costs a cluster's boot, burn-in and first steps."
            f"{_fixes(fc)} "
            "Check with `scripts/forecast <stack> --set key=value`.",
            None,
        )


def _refuse_malformed(res: Resource, error: ContractError, report: ReportViolation) -> None:
    """A model is declared but its forecast does not parse (a figure missing, not a finite number, or not
    known): fail closed, naming the field."""
    report(
        f"stack '{res.name}': the forecast cannot be read ({error}), so it cannot be checked; refused "
        "rather than let it through. Check training.model with `scripts/forecast <stack>`.",
        None,
    )


class BudgetConfig(PolicyConfig):
    max_run_cost_usd: float = Field(
        5000,
        ge=0,
        description="Most the forecast training run may cost, USD.",
        json_schema_extra={UNFILLED: True},
    )


def check_forecast_run_cost(args: StackValidationArgs, report: ReportViolation) -> None:
    """The forecast run cost (forecast hours x the stack's on-demand price) stays under `max_run_cost_usd`."""
    cfg = load_config(BudgetConfig, args.get_config(), report)
    if cfg is None:
        return
    # Two caps may apply (the stack's one cap, this policy's own deprecated key): the stricter holds.
    held = run_cap(
        args.resources,
        "run-cost-within-budget.max_run_cost_usd",
        cfg.max_run_cost_usd,
        "max_run_cost_usd" in cfg.model_fields_set,
    )
    cap = held.usd
    for res, fc in forecasts(args.resources):
        if isinstance(fc, ContractError):
            _refuse_malformed(res, fc, report)
            continue
        if fc is None or fc.run_cost_usd <= cap:
            continue
        cost, spot = fc.run_cost_usd, fc.spot_run_cost_usd
        spot_note = f" (at the spot bid: {usd(round(spot, 2))})" if spot is not None else ""
        report(
            f"stack '{res.name}': the forecast run costs {usd(round(cost, 2))}{spot_note}, "
            f"{fc.hours:.1f} h x {usd(fc.usd_per_hour)}/h on-demand for {fc.flops:.3g} FLOPs at MFU "
            f"{fc.mfu:.2f}: {usd(round(cost - cap, 2))} over the "
            f"budget of {usd(cap)}{held.why}. Train on fewer tokens, use LoRA, or raise "
            f"{held.key} if the budget allows it.",
            None,
        )


class HoursConfig(PolicyConfig):
    max_restarts: int = Field(
        0, ge=0, description="Watchdog stops (runs resumed from a checkpoint) accepted before this reports."
    )


def check_run_hours(args: StackValidationArgs, report: ReportViolation) -> None:
    """The forecast hours fit `training.max_run_hours` (advisory: the run resumes from its checkpoint)."""
    cfg = load_config(HoursConfig, args.get_config(), report)
    if cfg is None:
        return
    for res, fc in forecasts(args.resources):
        if fc is None:
            report(
                f"stack '{res.name}' declares no trainstack:training.model, so its memory, hours and run "
                "cost are not forecast and the forecast policies checked nothing; add the section "
                "(docs/FORECAST.md).",
                None,
            )
            continue
        if isinstance(fc, ContractError) or fc.restarts <= cfg.max_restarts:
            continue  # malformed: the mandatory policies refuse it
        hours, limit, restarts = fc.hours, fc.max_run_hours, fc.restarts
        report(
            f"stack '{res.name}': the run needs {hours:.1f} h but training.max_run_hours is {limit:g}, "
            f"so the watchdog stops it {restarts:.0f} time(s) and someone must resume it from its "
            "checkpoint (each restart also repeats up to one checkpoint interval). Raise max_run_hours "
            f"to at least {hours:.1f}, use more GPUs, or accept the restarts (`max_restarts` in the "
            "policy config).",
            None,
        )


MODEL_FITS = StackValidationPolicy(
    name="model-fits-gpu-memory",
    description="The lower end of the forecast per-GPU memory of training.model fits the GPU's memory.",
    validate=check_model_fits,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(MemoryConfig),
    remediation_steps=(
        "Shard further (sharding zero3), checkpoint activations, lower micro_batch_per_gpu, or add GPUs; "
        "`scripts/forecast <stack> --set ...` shows the effect of each."
    ),
)

MODEL_MAY_NOT_FIT = StackValidationPolicy(
    name="model-may-not-fit-gpu-memory",
    description="The upper end of the forecast per-GPU memory band of training.model fits the GPU's memory.",
    validate=check_model_may_not_fit,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=config_schema(MayNotFitConfig),
    remediation_steps=(
        "Take the first fix listed, or measure the run's peak memory on one GPU before renting the cluster."
    ),
)

RUN_COST = StackValidationPolicy(
    name="run-cost-within-budget",
    description="The forecast cost of the whole training run stays under `max_run_cost_usd`.",
    validate=check_forecast_run_cost,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(BudgetConfig),
    remediation_steps="Train on fewer tokens, use LoRA, or raise `max_run_cost_usd`.",
)

RUN_HOURS = StackValidationPolicy(
    name="run-fits-max-hours",
    description="The forecast run fits training.max_run_hours without watchdog restarts.",
    validate=check_run_hours,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=config_schema(HoursConfig),
    remediation_steps="Raise training.max_run_hours, add GPUs, or accept restarts with `max_restarts`.",
)

POLICIES = (MODEL_FITS, MODEL_MAY_NOT_FIT, RUN_COST, RUN_HOURS)
