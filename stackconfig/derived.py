"""What follows from the whole stack config, not from one section: the run's one cost cap and the preview's
notices about it and the alerts. The sections (`alerts.py`, `supervisor.py`, ...) never import `StackConfig`;
the functions over all of it live here, in `rules.py` (the cross-field rules) and in `pricing.py`, above
`config.py`, so the package has no import cycle (pyproject.toml's acyclic contract)."""

from __future__ import annotations

from stackconfig.alerts import WEBHOOK_SECRET
from stackconfig.config import StackConfig
from stackconfig.supervisor import RUN_CAP_KEY


def run_cost_cap(config: StackConfig) -> float:
    """USD the run may cost (0: no cap): `run.max_cost_usd`, else the deprecated `alerts.budget_usd`."""
    return config.run.max_cost_usd or config.alerts.budget_usd


def cap_notice(config: StackConfig) -> str | None:
    """A preview warning while the cap is still set under its old name."""
    if config.alerts.budget_usd and not config.run.max_cost_usd:
        return (
            f"trainstack:alerts.budget_usd is deprecated: the run's one cost cap is {RUN_CAP_KEY} (read by "
            "alerts, the policy pack and the supervisor); move the value there"
        )
    if config.alerts.budget_usd and config.run.max_cost_usd != config.alerts.budget_usd:
        return (
            f"trainstack:alerts.budget_usd ({config.alerts.budget_usd:g}) is ignored: {RUN_CAP_KEY} "
            f"({config.run.max_cost_usd:g}) is the run's cost cap; remove the old key"
        )
    return None


def webhook_notice(config: StackConfig) -> str | None:
    """A preview warning when alerts are on but no webhook secret is listed: they reach no one's phone."""
    if not config.alerts.enabled or WEBHOOK_SECRET in config.training.secrets:
        return None
    return (
        f"alerts reach no chat: add {WEBHOOK_SECRET} to trainstack:training.secrets and set it with "
        f"`pulumi config set --secret trainstack:secrets.{WEBHOOK_SECRET} <incoming webhook URL>`; until "
        "then alerts are only in scripts/watch (docs/MONITORING.md)"
    )
