"""`trainstack:team`: the team's settings shared by every stack, in one file (`stacks/team.yaml`).

The monthly budget is for the whole RunPod account (every stack and whatever else bills there), checked on
every pull request by `scripts/team-budget` (docs/TEAM-BUDGET.md): month-to-date spend from RunPod billing
plus the forecast run cost of each stack the pull request changes. Over it, the `team-budget` check fails
unless the override label was set by someone the file names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from common.errors import TrainstackError
from stackconfig.files import STACKS_DIR

TEAM_FILE = STACKS_DIR / "team.yaml"  # not `Pulumi.team.yaml`: that would be read as a stack
TEAM_KEY = "trainstack:team"
# GitHub logins: alphanumerics and single hyphens, at most 39 characters (GitHub's sign-up rule).
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")


class TeamConfigError(TrainstackError, ValueError):
    """The team file is missing or breaks its rules; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Override(_Model):
    """Who may let a pull request past the budget: a label, and the people whose setting of it counts."""

    label: str = "team-budget-override"
    allowed: tuple[str, ...] = Field(min_length=1)  # GitHub logins; a label set by anyone else is ignored

    @field_validator("allowed")
    @classmethod
    def _logins(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [login for login in v if not _LOGIN.match(login)]
        if bad:
            raise ValueError(f"not GitHub logins: {', '.join(repr(b) for b in bad)}")
        return v


class TeamConfig(_Model):
    """`trainstack:team` in `stacks/team.yaml`."""

    monthly_budget_usd: Annotated[float, Field(gt=0)]  # the account's spend per calendar month (UTC)
    override: Override


def load_team(path: Path = TEAM_FILE) -> TeamConfig:
    """The team's settings; TeamConfigError names the file and the first bad field."""
    if not path.is_file():
        raise TeamConfigError(f"no team file: {path} (docs/TEAM-BUDGET.md shows one)")
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    raw = (doc.get("config") or {}).get(TEAM_KEY) if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise TeamConfigError(f"{path}: no `config: {TEAM_KEY}:` map")
    try:
        return TeamConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise TeamConfigError(f"{path}: {TEAM_KEY}.{where}: {first['msg']}") from None
