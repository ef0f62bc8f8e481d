"""Tiny policy pack: the toolcheck Thing must not hold the value 'forbidden'."""

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


def _no_forbidden(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if (
        args.resource_type == "pulumi-python:dynamic/toolcheck:Thing"
        and args.props.get("value") == "forbidden"
    ):
        report_violation("value 'forbidden' is not allowed: pick another value")


PolicyPack(
    name="toolcheck",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="no-forbidden", description="no forbidden values", validate=_no_forbidden
        )
    ],
)
