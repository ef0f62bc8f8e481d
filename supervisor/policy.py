"""The policy a round decides under: the stack's parsed `trainstack:supervisor` and `trainstack:recovery`
sections as they are (stackconfig/supervisor.py declares each field and its default, once; the idle
thresholds' defaults are the idle rule's own, supervisor/rules/idle.py), the run's cost cap and the
training's burn-in. Nothing is copied: a rule reads `policy.supervisor` (the idle rule through its own
`threshold`, which resolves a field left unset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stackconfig.supervisor import RecoveryConfig, SupervisorConfig


@dataclass(frozen=True, init=False)
class Policy:
    """The parsed config, the run's cost cap (USD, 0: none) and the burn-in added to the boot.

    `Policy(warn_at=0.5, cap_usd=100)`: any field of SupervisorConfig may be given by name (tests and
    `dataclasses.replace`); it is validated by the config's own model, so a policy is always one a stack
    could have."""

    supervisor: SupervisorConfig
    cap_usd: float
    recovery: RecoveryConfig
    burn_in_min: float

    def __init__(
        self,
        supervisor: SupervisorConfig | None = None,
        cap_usd: float = 0.0,
        recovery: RecoveryConfig | None = None,
        burn_in_min: float = 0.0,
        **fields: Any,
    ) -> None:
        base = supervisor or SupervisorConfig()
        if fields:
            base = SupervisorConfig.model_validate({**base.model_dump(), **fields})
        object.__setattr__(self, "supervisor", base)
        object.__setattr__(self, "cap_usd", float(cap_usd))
        # off unless given: scripts/supervise passes the stack's trainstack:recovery
        object.__setattr__(self, "recovery", recovery or RecoveryConfig(enabled=False))
        object.__setattr__(self, "burn_in_min", float(burn_in_min))

    @classmethod
    def of(
        cls,
        config: SupervisorConfig,
        cap_usd: float,
        recovery: RecoveryConfig | None = None,
        burn_in_min: float = 0.0,
    ) -> Policy:
        return cls(config, cap_usd, recovery, burn_in_min)

    def __getattr__(self, name: str) -> Any:
        """A field of the supervisor section by its own name (`policy.warn_at`): read, not copied."""
        if name != "supervisor" and name in SupervisorConfig.model_fields:
            return getattr(self.supervisor, name)
        raise AttributeError(name)

    @property
    def interval_min(self) -> float:
        return self.supervisor.interval_min

    @property
    def boot_timeout_min(self) -> float:
        """No step this long after the compute came up: never started (the burn-in is part of the boot)."""
        return self.supervisor.boot_timeout_min + self.burn_in_min
