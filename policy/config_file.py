"""Check a policy config file (`--policy-pack-config`) before the Pulumi CLI reads it.

The CLI's own errors name nothing: a misspelt policy name gives "invalid enforcement level ''", a file
written as YAML "invalid character 'h' looking for beginning of value", `1e309` "cannot unmarshal number".
Here every problem names the file, the key path and the fix. The scripts run it before `pulumi`:

    python -m policy.config_file policy/config/prod.json [...]     exit 0 when valid, 2 with the problems

The file is JSON: `{"<policy name>": {"<key>": value, ..., "enforcementLevel": "advisory"}, ...}` or
`{"<policy name>": "<enforcement level>"}` (https://www.pulumi.com/docs/iac/using-pulumi/crossguard/configuration/).
"""

from __future__ import annotations

import difflib
import json
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pydantic
import yaml

from policy.rules import ALL_POLICIES
from policy.rules.common import PolicyConfig, model_of

# Each policy's config model, by the name the config file uses; None for a policy that takes no config.
CONFIG_MODELS: dict[str, type[PolicyConfig] | None] = {
    p.name: model_of(getattr(p, "config_schema", None)) for p in ALL_POLICIES
}
LEVELS = ("advisory", "mandatory", "remediate", "disabled")
LEVEL_KEY = "enforcementLevel"
_README = "policy/README.md lists every policy and key"


def _non_finite(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _parse(text: str) -> tuple[Any, list[str]]:
    """The document, or the problems that keep it from being one."""
    try:
        return json.loads(text, parse_constant=_refuse_constant), []
    except ValueError as exc:
        try:
            as_yaml = yaml.safe_load(text)
        except yaml.YAMLError:
            as_yaml = None
        if isinstance(as_yaml, Mapping) and not text.lstrip().startswith("{"):
            return None, ["(file): is YAML, not JSON; the Pulumi CLI reads JSON only: rewrite it as JSON"]
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, [f"(file): is not valid JSON{where} ({exc}); fix the syntax"]


def _entry_problems(name: str, entry: Any) -> list[str]:
    if isinstance(entry, str):
        return (
            []
            if entry in LEVELS
            else [f"{name}: enforcement level {entry!r}; use one of {', '.join(LEVELS)}"]
        )
    if not isinstance(entry, Mapping):
        return [f'{name}: is not an object; write {{"key": value, ...}} or an enforcement level']
    problems = []
    level = entry.get(LEVEL_KEY)
    if level is not None and level not in LEVELS:
        problems.append(f"{name}.{LEVEL_KEY}: {level!r} is not a level; use one of {', '.join(LEVELS)}")
    settings = {k: v for k, v in entry.items() if k != LEVEL_KEY}
    model = CONFIG_MODELS[name]
    if model is None:
        extra = sorted(settings)
        return problems + [f"{name}.{k}: this policy takes no config; remove it" for k in extra]
    try:
        model.model_validate(settings)
    except pydantic.ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            fix = "fix the value"
            if err["type"] == "extra_forbidden":
                near = difflib.get_close_matches(key, list(model.model_fields), n=1)
                fix = f"did you mean {near[0]!r}?" if near else "remove it or fix the spelling"
            problems.append(f"{name}.{key}: {err['msg'][:1].lower()}{err['msg'][1:]}; {fix} ({_README})")
    return problems


def problems_in(text: str) -> list[str]:
    """Every problem in a policy config file's text, each `<key path>: <what is wrong>; <fix>`."""
    doc, problems = _parse(text)
    if problems:
        return problems
    if not isinstance(doc, Mapping):
        return ['(file): is not a JSON object; write {"<policy name>": {...}, ...}']
    out = [f"{path}: numbers must be finite (1e309 and the like overflow); write a smaller number"
           for path in _non_finite(doc, "")]  # fmt: skip
    for name, entry in doc.items():
        if name not in CONFIG_MODELS:
            near = difflib.get_close_matches(name, CONFIG_MODELS, n=1)
            hint = f"did you mean {near[0]!r}?" if near else _README
            out.append(f"{name}: no policy of that name; fix the spelling ({hint})")
        elif not any(p.startswith(f"{name}.") for p in out):
            out += _entry_problems(name, entry)
    return out


def main(argv: list[str] | None = None) -> int:
    files = sys.argv[1:] if argv is None else argv
    bad = 0
    for name in files:
        path = Path(name)
        try:
            problems = problems_in(path.read_text())
        except OSError as exc:
            problems = [f"(file): cannot be read ({exc.strerror}); check the path"]
        for problem in problems:
            print(f"{name}: {problem}", file=sys.stderr)
        bad += bool(problems)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
