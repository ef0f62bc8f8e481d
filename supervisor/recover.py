"""Recovery's decisions, where earlier code and the docs name them: the plan
(supervisor/rules/recovery_plan.py) and the faults it answers (supervisor/rules/detect.py).
docs/RECOVERY.md explains each."""

from __future__ import annotations

from supervisor.faults import news
from supervisor.model import Plan
from supervisor.rules.detect import (
    NODE_FAULTS,
    RECOVERY_KINDS,
    RETRY,
    WHY_NEVER,
    Fault,
    find_fault,
    stall_threshold_s,
)
from supervisor.rules.recovery_plan import assess, recovery

__all__ = [
    "NODE_FAULTS",
    "RECOVERY_KINDS",
    "RETRY",
    "WHY_NEVER",
    "Fault",
    "Plan",
    "assess",
    "find_fault",
    "news",
    "recovery",
    "stall_threshold_s",
]
