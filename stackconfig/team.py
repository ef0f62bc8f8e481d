"""`trainstack:team`: the team's settings shared by every stack, in one file (`stacks/team.yaml`).

The monthly budget is for the whole RunPod account (every stack and whatever else bills there), checked on
every pull request by `scripts/team-budget` (docs/TEAM-BUDGET.md): month-to-date spend from RunPod billing
plus the forecast run cost of each stack the pull request changes. Over it, the `team-budget` check fails
unless the override label was set by someone the file names.

The file is read with a YAML loader that refuses a key given twice (PyYAML's own keeps the last one silently:
a second `monthly_budget_usd` further down would win unseen), and every number must be finite and positive.
GitHub logins are compared as GitHub compares them, without regard to case (`Override.allows`).
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


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping giving a key twice is an error naming it and its line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice; keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


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

    def allows(self, login: str | None) -> bool:
        """Whether `login` is one of `allowed`, compared as GitHub compares logins: without regard to case."""
        return login is not None and login.casefold() in {a.casefold() for a in self.allowed}


class TeamConfig(_Model):
    """`trainstack:team` in `stacks/team.yaml`."""

    monthly_budget_usd: Annotated[float, Field(gt=0)]  # the account's spend per calendar month (UTC)
    override: Override


def plain_yaml_error(exc: yaml.YAMLError) -> str:
    """PyYAML's problem and where, on one line."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)


def load_team(path: Path = TEAM_FILE) -> TeamConfig:
    """The team's settings; TeamConfigError names the file and the first bad field."""
    if not path.is_file():
        raise TeamConfigError(f"no team file: {path} (docs/TEAM-BUDGET.md shows one)")
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeys) or {}  # noqa: S506 (safe)
    except UnicodeDecodeError:
        raise TeamConfigError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise TeamConfigError(f"{path}: is not valid YAML ({plain_yaml_error(exc)}); fix it") from None
    except RecursionError:
        raise TeamConfigError(
            f"{path}: is nested too deep to read; write the map of docs/TEAM-BUDGET.md"
        ) from None
    raw = (doc.get("config") or {}).get(TEAM_KEY) if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise TeamConfigError(f"{path}: no `config: {TEAM_KEY}:` map")
    try:
        return TeamConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise TeamConfigError(f"{path}: {TEAM_KEY}.{where}: {first['msg']}") from None
