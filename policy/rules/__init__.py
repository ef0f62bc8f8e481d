"""trainstack's policies, one module per concern; importing them only builds policy objects."""

from __future__ import annotations

from pulumi_policy import Policy

from policy.rules import availability, budget, capacity, common, forecast, placement, security

ALL_POLICIES: tuple[Policy, ...] = (
    *capacity.POLICIES,
    *budget.POLICIES,
    *security.POLICIES,
    *placement.POLICIES,
    *forecast.POLICIES,
    *availability.POLICIES,
)

common.name_models(ALL_POLICIES)

__all__ = ["ALL_POLICIES"]
