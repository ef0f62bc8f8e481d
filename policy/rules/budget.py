"""Budget policies: hourly burn, cost of one run, monthly storage and RunPod's account spend limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy
from pydantic import Field

from common.outputs import ForecastOutput
from facts.money import burn_per_hour
from policy.rules.common import (
    RUNPOD_TYPES,
    UNFILLED,
    PolicyConfig,
    Resource,
    config_schema,
    listing,
    load_config,
    number,
    read,
    run_cap,
    usd,
)
from policy.rules.forecast import forecasts


def _set(cfg: PolicyConfig, key: str) -> bool:
    """Whether the policy config file wrote `key` (not left it at the model's default)."""
    return key in cfg.model_fields_set


@dataclass(frozen=True)
class Cost:
    """What one resource costs, as declared by its provider's check() (ARCHITECTURE.md)."""

    name: str
    per_hour: float  # compute, USD/h (for `capacity: auto` the dearer on-demand price)
    storage_per_month: float  # USD/month; billed hourly, so it also adds to the hourly burn
    run_hours: float | None  # training.max_run_hours when declared

    @property
    def burn(self) -> float:
        return burn_per_hour(self.per_hour, self.storage_per_month)


def costs(resources: Sequence[Resource], *types: str) -> list[Cost]:
    """Costs of the billed (RunPod) resources whose figures are known (see `unpriced` for the others).

    Only provider resources are billed: components and the stack re-export their children's totals as
    `cost_per_hour` outputs, and counting those would count every dollar more than once.
    """
    allowed = types or RUNPOD_TYPES
    found: list[Cost] = []
    for res in resources:
        if res.resource_type not in allowed:
            continue
        per_hour = number(read(res.props, "cost_per_hour"))
        storage = number(read(res.props, "storage_cost_per_month"))
        if per_hour is None and storage is None:
            continue
        hours = number(read(res.props, "training", "max_run_hours"))
        found.append(Cost(res.name, per_hour or 0.0, storage or 0.0, hours))
    return found


def unpriced(resources: Sequence[Resource], *types: str) -> list[str]:
    """Billed resources whose `cost_per_hour` or `storage_cost_per_month` is not a finite number: unknown
    at preview, missing, or garbage. Every provider computes both in check(), so this never happens to a
    stack the budget can be checked on; when it does, the budget fails closed."""
    allowed = types or RUNPOD_TYPES
    return sorted(
        res.name or res.resource_type
        for res in resources
        if res.resource_type in allowed
        and any(number(read(res.props, key)) is None for key in ("cost_per_hour", "storage_cost_per_month"))
    )


def _refused_unpriced(resources: Sequence[Resource], report: ReportViolation, *types: str) -> bool:
    names = unpriced(resources, *types)
    if names:
        report(
            f"the cost of {listing(names)} is not known, so the budget cannot be checked; refused rather "
            "than let an unchecked bill through. Every trainstack provider prices its resource in check(): "
            "fix the input its message names (a GPU type, a count), then preview again.",
            None,
        )
    return bool(names)


def breakdown(items: Sequence[Cost]) -> str:
    """`a: $255.36/h, b: $0.10/h`, dearest first."""
    ranked = sorted((c for c in items if c.burn > 0), key=lambda c: c.burn, reverse=True)
    return listing([f"{c.name}: {usd(round(c.burn, 2))}/h" for c in ranked])


def _burn(items: Sequence[Cost]) -> float:
    return round(sum(c.burn for c in items), 2)


class HourlyConfig(PolicyConfig):
    max_hourly_usd: float = Field(80, ge=0, description="Most the whole stack may cost per hour, USD.")


def check_hourly_burn(args: StackValidationArgs, report: ReportViolation) -> None:
    """The stack's hourly burn (compute plus storage billed hourly) stays under `max_hourly_usd`."""
    cfg = load_config(HourlyConfig, args.get_config(), report)
    if cfg is None or _refused_unpriced(args.resources, report):
        return
    items = costs(args.resources)
    burn = _burn(items)
    if burn <= cfg.max_hourly_usd:
        return
    report(
        f"stack burns {usd(burn)}/h ({breakdown(items)}), {usd(round(burn - cfg.max_hourly_usd, 2))}/h over "
        f"the configured cap of {usd(cfg.max_hourly_usd)}/h. Use fewer or cheaper GPUs, or raise "
        "`max_hourly_usd` in the policy config if the budget allows it.",
        None,
    )


class RunCostConfig(PolicyConfig):
    max_run_usd: float = Field(
        5000, ge=0, description="Most one training run may cost, USD.", json_schema_extra={UNFILLED: True}
    )
    default_run_hours: float = Field(
        24,
        gt=0,
        description="Run length assumed when no resource declares training.max_run_hours.",
    )


def check_run_cost(args: StackValidationArgs, report: ReportViolation) -> None:
    """One run stays under `max_run_usd`. One run is the stack's one run cost (the report's headline,
    `scripts/up`'s "one run $X", the output `cost_per_run`): the stack's hourly price for the forecast's
    hours where the stack declares training.model, else each resource's burn for its max_run_hours."""
    cfg = load_config(RunCostConfig, args.get_config(), report)
    if cfg is None or _refused_unpriced(args.resources, report):
        return
    items = costs(args.resources)
    declared = [c.run_hours for c in items if c.run_hours is not None]
    # Volumes and other resources without a run length are billed for as long as the longest run.
    longest = max(declared, default=cfg.default_run_hours)
    parts = [(c, c.run_hours if c.run_hours is not None else longest) for c in items]
    bound = round(sum(c.burn * hours for c, hours in parts), 2)
    # Two caps may apply (the stack's one cap, this policy's own deprecated key): the stricter holds.
    held = run_cap(args.resources, "run-cost-limit.max_run_usd", cfg.max_run_usd, _set(cfg, "max_run_usd"))
    cap = held.usd
    # A forecast that does not parse is refused by the forecast policies; here the bound stands in for it.
    models = [fc for _, fc in forecasts(args.resources) if isinstance(fc, ForecastOutput)]
    hours = max((_forecast_hours(fc) for fc in models), default=None)
    price = burn_per_hour(sum(c.per_hour for c in items), sum(c.storage_per_month for c in items))
    total = bound if hours is None else round(price * hours, 2)
    if total <= cap:
        return
    ranked = sorted(parts, key=lambda part: part[0].burn * part[1], reverse=True)
    shown = listing([f"{c.name}: {usd(round(c.burn, 2))}/h x {h:g} h" for c, h in ranked if c.burn > 0])
    over = f"{usd(round(total - cap, 2))} over the configured cap of {usd(cap)}{held.why}"
    if models:
        # The one run cost everywhere (issue #68: $47.39 in the report's headline, $127.71 here); the
        # max_run_hours figure is only the bound the watchdog sets, said as such.
        report(
            f"one run costs {usd(total)} (forecast: {hours:,.1f} h of training x {usd(round(price, 2))}/h), "
            f"{over}; at most (stopped by the watchdog at "
            f"training.max_run_hours) it would cost {usd(bound)} ({shown}). Train on fewer tokens, use "
            f"fewer GPUs, or raise {held.key}.",
            None,
        )
        return
    assumed = "" if declared else f"; no training.max_run_hours set: assumed {longest:g} h"
    report(
        f"one run costs {usd(total)} at its longest (no training.model to forecast: $/h x "
        f"training.max_run_hours, where the watchdog stops it; {shown}{assumed}), {over}. Shorten "
        f"training.max_run_hours, use fewer GPUs, or raise {held.key}.",
        None,
    )


def _forecast_hours(fc: ForecastOutput) -> float:
    """The forecast's hours to the precision of its run cost (the output rounds `hours` to 0.01 h), as the
    report's headline and the output `cost_per_run` take them: run_cost_usd / usd_per_hour, else `hours`."""
    return fc.run_cost_usd / fc.usd_per_hour if fc.usd_per_hour else fc.hours


class StorageConfig(PolicyConfig):
    max_storage_monthly_usd: float = Field(
        300, ge=0, description="Most the stack's volumes and disks may cost per month, USD."
    )


def check_storage_cost(args: StackValidationArgs, report: ReportViolation) -> None:
    """Monthly storage (volumes, disks: storage_cost_per_month) stays under `max_storage_monthly_usd`."""
    cfg = load_config(StorageConfig, args.get_config(), report)
    if cfg is None or _refused_unpriced(args.resources, report):
        return
    items = [c for c in costs(args.resources) if c.storage_per_month > 0]
    total = round(sum(c.storage_per_month for c in items), 2)
    if total <= cfg.max_storage_monthly_usd:
        return
    ranked = sorted(items, key=lambda c: c.storage_per_month, reverse=True)
    shown = listing([f"{c.name}: {usd(round(c.storage_per_month, 2))}/month" for c in ranked])
    report(
        f"storage costs {usd(total)}/month ({shown}), {usd(round(total - cfg.max_storage_monthly_usd, 2))}"
        f"/month over the configured cap of {usd(cfg.max_storage_monthly_usd)}/month. Network volumes are "
        "billed even with no pod attached: shrink or delete volumes, or raise `max_storage_monthly_usd`.",
        None,
    )


class SpendLimitConfig(PolicyConfig):
    runpod_spend_limit_per_hour: float = Field(
        80,
        ge=0,
        description="The RunPod account's spend limit, USD/h (RunPod's default is $80/h).",
    )


def check_runpod_spend_limit(args: StackValidationArgs, report: ReportViolation) -> None:
    """RunPod resources together stay under the account's hourly spend limit, or a deploy fails part-way."""
    cfg = load_config(SpendLimitConfig, args.get_config(), report)
    if cfg is None or _refused_unpriced(args.resources, report, *RUNPOD_TYPES):
        return
    items = costs(args.resources, *RUNPOD_TYPES)
    burn, limit = _burn(items), cfg.runpod_spend_limit_per_hour
    if burn <= limit:
        return
    compute = [c.name for c in items if c.per_hour > 0 and c.name]
    report(
        f"stack burns {usd(burn)}/h ({breakdown(items)}), {usd(round(burn - limit, 2))}/h over RunPod's "
        f"account spend limit of {usd(limit)}/h; RunPod refuses resources past the limit, so the deploy "
        f"would stop part-way ({listing(compute)} may be left half-created). Ask RunPod support (or use "
        "the console's billing settings) to raise the account's spend limit, then set the new figure as "
        "`runpod_spend_limit_per_hour` in the policy config.",
        None,
    )


HOURLY_BURN = StackValidationPolicy(
    name="hourly-burn-limit",
    description="The stack's hourly burn stays under `max_hourly_usd`.",
    validate=check_hourly_burn,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(HourlyConfig),
    remediation_steps="Use fewer or cheaper GPUs, or raise `max_hourly_usd` in the policy config.",
)

RUN_COST = StackValidationPolicy(
    name="run-cost-limit",
    description=(
        "One training run (the stack's price for the forecast's hours, else hourly burn x "
        "training.max_run_hours) stays under `max_run_usd`."
    ),
    validate=check_run_cost,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(RunCostConfig),
    remediation_steps=(
        "Train on fewer tokens, shorten training.max_run_hours, use fewer GPUs, or raise `max_run_usd`."
    ),
)

STORAGE_COST = StackValidationPolicy(
    name="storage-cost-limit",
    description="Monthly storage (storage_cost_per_month) stays under `max_storage_monthly_usd`.",
    validate=check_storage_cost,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(StorageConfig),
    remediation_steps="Shrink or delete volumes, or raise `max_storage_monthly_usd`.",
)

RUNPOD_SPEND_LIMIT = StackValidationPolicy(
    name="runpod-spend-limit",
    description="RunPod resources stay under the account's hourly spend limit (default $80/h).",
    validate=check_runpod_spend_limit,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(SpendLimitConfig),
    remediation_steps=(
        "Ask RunPod support or use the console's billing settings to raise the spend limit, then set "
        "`runpod_spend_limit_per_hour` in the policy config."
    ),
)

POLICIES = (HOURLY_BURN, RUN_COST, STORAGE_COST, RUNPOD_SPEND_LIMIT)
