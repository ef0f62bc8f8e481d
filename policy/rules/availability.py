"""Where the stack can run now (advisory): RunPod's stock for its GPU type and count in each candidate data
center, read at preview by the providers' check() (the `availability` property of pods and clusters).

Capacity is advisory by nature: stock moves by the minute, the levels are coarse, and RunPod's answer at
create is the last word (a cluster then falls back along `trainstack:cluster.data_centers`). So the policy
only warns, and a read that failed is said plainly ("could not be read"), never a block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy
from pydantic import Field

from policy.rules.common import CLUSTER, POD, PolicyConfig, config_schema, load_config, read
from policy.stock import describe, group, short_of


class CapacityConfig(PolicyConfig):
    warn_below: Literal["LOW", "MEDIUM", "HIGH"] = Field(
        "LOW",
        description="Warn when a candidate data center reads below this level (LOW: warn on none free).",
    )


def capacity_rows(args: StackValidationArgs) -> list[tuple[str, Mapping[str, object]]]:
    """(`pod` or `cluster`, its `availability`) for every compute resource whose read is known."""
    out: list[tuple[str, Mapping[str, object]]] = []
    for res in args.resources:
        if res.resource_type not in (POD, CLUSTER):
            continue
        cap = read(res.props, "availability")
        if isinstance(cap, Mapping):
            out.append(("pod" if res.resource_type == POD else "cluster", cap))
    return out


def check_capacity(args: StackValidationArgs, report: ReportViolation) -> None:
    """Each GPU shape of the stack has stock in its candidate data centers, as far as the catalog says."""
    cfg = load_config(CapacityConfig, args.get_config(), report)
    if cfg is None:
        return
    for cap, nodes in group(capacity_rows(args)):
        short = short_of(cap, cfg.warn_below)
        if cap.get("read") and not short:
            continue
        fix = (
            " RunPod answers at create; `up` falls back along trainstack:cluster.data_centers for a cluster "
            "with no volume, and a volume commits to the first data center with stock. Add data centers, "
            "or try later."
            if short
            else ""
        )
        report(f"{describe(cap, nodes)}.{fix}", None)


CAPACITY_AVAILABLE = StackValidationPolicy(
    name="capacity-available",
    description="The stack's GPU type and count are in stock in its candidate data centers (advisory).",
    validate=check_capacity,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=config_schema(CapacityConfig),
    remediation_steps="List more data centers in trainstack:cluster.data_centers, or run `up` later.",
)

POLICIES = (CAPACITY_AVAILABLE,)
