"""Parse a stack's `trainstack:*` config into `stackconfig.config`'s models: keys with or without their
namespace, objects as JSON text or parsed, renamed fields read under their new names, unknown keys with the
closest known one, pydantic's errors and the cross-field rules as `ConfigProblem`s with their fix, and the
declared secrets that have no value. One `ConfigError` lists every problem.
"""

from __future__ import annotations

import json
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from stackconfig.config import (
    ENV_RE,
    NAMESPACE,
    REGISTRY_PASSWORD_KEY,
    SECRETS_KEY,
    ConfigError,
    ConfigProblem,
    StackConfig,
    secret_config_key,
)
from stackconfig.rules import cross_field_problems

_OBJECT_KEYS = frozenset({"cluster", "bucket", "training", "alerts", "supervisor", "run", "recovery"})
# Renamed fields: (object key, old name) -> new name. The old name still works, with a deprecation message.
# nccl_min_busbw_gbps read as gigabits per second, but the floor is in gigabytes per second (GB/s), the unit
# nccl-tests reports bus bandwidth in.
# (section, old name) -> (new name, why)
_RENAMED = {
    ("training", "nccl_min_busbw_gbps"): (
        "nccl_min_busbw_gb_per_s",
        "the figure is GB/s, gigabytes per second",
    ),
    # Two different things had one name: trainstack:alerts.stalled_after_min (15) is the alert to a person.
    ("recovery", "stalled_after_min"): (
        "hang_after_min",
        "it is the supervisor's hang, not the alert's stall",
    ),
}
# Config keys whose name differs from the field (camelCase keys other parts of the project already read).
_KEY_ALIASES = {"s3EndpointUrl": "s3_endpoint_url"}
KNOWN_KEYS = frozenset(StackConfig.model_fields) - set(_KEY_ALIASES.values()) | set(_KEY_ALIASES)


def _renamed(
    name: str, value: dict[str, Any], warn: Callable[[str], None]
) -> tuple[dict[str, Any], str | None]:
    """`value` with renamed fields under their new names (each use of an old name goes to `warn`), or the
    problem when both names are set."""
    out = dict(value)
    for (obj, old), (new, why) in _RENAMED.items():
        if obj != name or old not in out:
            continue
        path = f"{NAMESPACE}:{obj}"
        if new in out:
            return out, f"{path}.{old} and {path}.{new} are both set; keep only {new}"
        out[new] = out.pop(old)
        warn(f"{path}.{old} is deprecated ({why}); rename it to {new}")
    return out, None


def missing_secret_problems(
    values: Mapping[str, Any], has_secret: Callable[[str], bool]
) -> list[ConfigProblem]:
    """A problem per secret the config declares (training.secrets, cluster.registry_auth's password) whose
    `trainstack:secrets.<NAME>` has no value, each with its own `pulumi config set --secret` line.
    Read from the config as written, so they are listed beside every other problem, even when the rest of
    the config does not parse; a name that is not an env name is the secrets validator's to report."""
    training = values.get("training")
    names = training.get("secrets") if isinstance(training, Mapping) else None
    declared = [n for n in names if isinstance(n, str) and ENV_RE.match(n)] if isinstance(names, list) else []
    out = [
        ConfigProblem(
            secret_config_key(name),
            f"has no value; set it with `pulumi config set --secret {secret_config_key(name)} <value>`",
        )
        for name in dict.fromkeys(declared)
        if not has_secret(name)
    ]
    cluster = values.get("cluster")
    if isinstance(cluster, Mapping) and cluster.get("registry_auth") and not has_secret("REGISTRY_PASSWORD"):
        fix = f"has no value; set it with `pulumi config set --secret {REGISTRY_PASSWORD_KEY} <password>`"
        out.append(ConfigProblem(REGISTRY_PASSWORD_KEY, fix))
    return out


def load_stack_config(
    raw: Mapping[str, Any],
    warn: Callable[[str], None] | None = None,
    has_secret: Callable[[str], bool] | None = None,
) -> StackConfig:
    """Parse the `trainstack:*` config (keys with or without the namespace; values as Pulumi gives them:
    strings, JSON strings for objects, or already-parsed values). Raises one ConfigError listing every
    problem. Keys of other namespaces and `trainstack:secrets.*` values are ignored. A field under an old
    name is read as the new one and `warn` (default: a DeprecationWarning) gets a message saying so.
    With `has_secret` (whether `trainstack:secrets.<NAME>` has a value), every declared secret without one
    is a problem too (`missing_secret_problems`)."""
    config, refusals = load_with_rule_problems(raw, warn, has_secret)
    if refusals:
        raise ConfigError(refusals)
    return config


def load_with_rule_problems(
    raw: Mapping[str, Any],
    warn: Callable[[str], None] | None = None,
    has_secret: Callable[[str], bool] | None = None,
) -> tuple[StackConfig, list[ConfigProblem]]:
    """`load_stack_config`'s parse, with the cross-field rules the parsed config breaks returned beside it
    instead of raised (the config still means something: `scripts/forecast` shows its forecast, then what
    the rules say of it). Everything else is raised as load_stack_config raises it."""
    warn = warn or (lambda msg: warnings.warn(msg, DeprecationWarning, stacklevel=3))
    values: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for key, value in raw.items():
        namespace, _, name = key.rpartition(":")
        if namespace not in ("", NAMESPACE) or name == SECRETS_KEY or name.startswith(SECRETS_KEY + "."):
            continue
        if name not in KNOWN_KEYS:
            known = ", ".join(f"{NAMESPACE}:{k}" for k in sorted(KNOWN_KEYS))
            hint = did_you_mean(name, {**{k: k for k in KNOWN_KEYS}, **leaf_paths()})
            msg = f"unknown key; {hint or 'fix the spelling '}({known})"
            problems.append(ConfigProblem(f"{NAMESPACE}:{name}", msg))
            continue
        if name in _OBJECT_KEYS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                msg = f"is not valid JSON ({exc.msg}); {_OBJ_FIX}"
                problems.append(ConfigProblem(f"{NAMESPACE}:{name}", msg))
                continue
        if name in _OBJECT_KEYS and isinstance(value, dict):
            value, both = _renamed(name, value, warn)
            if both:
                problems.append(ConfigProblem(f"{NAMESPACE}:{name}", both))
                continue
        values[_KEY_ALIASES.get(name, name)] = value
    if has_secret is not None:
        problems += missing_secret_problems(values, has_secret)
    try:
        config = StackConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(problems + [_from_pydantic(err) for err in exc.errors()]) from None
    rules = [ConfigProblem(f"{NAMESPACE}:{path}", msg) for path, msg in cross_field_problems(config)]
    if problems:
        raise ConfigError(problems + rules)
    return config, rules


_OBJ_FIX = "write it as a YAML mapping under the key in stacks/Pulumi.<stack>.yaml"

# Fixes for pydantic's own (type-level) errors; domain rules carry their fix in the validator text.
_PYDANTIC_FIXES = {
    "missing": "add it; see stacks/Pulumi.prod.yaml for an example",
    "extra_forbidden": "remove it or fix the spelling; the fields are listed in stackconfig/config.py",
    "literal_error": "use one of the values listed",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "int_from_float": "write a whole number",
    "float_parsing": "write a number",
    "float_type": "write a number",
    "finite_number": "write a finite number (no NaN or infinity)",
    "less_than_equal": "write a number within the range",
    "less_than": "write a number within the range",
    "greater_than_equal": "write a number within the range",
    "greater_than": "write a number within the range",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "string_type": "write a string",
    "tuple_type": "write a YAML list",
    "model_type": _OBJ_FIX,
    "model_attributes_type": _OBJ_FIX,
}


def did_you_mean(name: str, candidates: Mapping[str, str]) -> str:
    """`did you mean trainstack:<path>? ` for the candidate name closest to `name` (difflib), or ''.
    `candidates`: name as typed -> the key path it stands for."""
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {NAMESPACE}:{candidates[close[0]]}? " if close else ""


def _fields_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """Field name -> the model it holds (for nested sections), else None."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        kinds = [info.annotation, *typing.get_args(info.annotation)]
        out[name] = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
    return out


def leaf_paths(model: type[BaseModel] | None = None, prefix: str = "") -> dict[str, str]:
    """Every field below the top-level keys by its own name -> its dotted path (`nodes` -> `cluster.nodes`),
    for suggestions when a bare field name is given where a key path belongs."""
    out: dict[str, str] = {}
    for name, sub in _fields_of(model or StackConfig).items():
        path = f"{prefix}{name}"
        if sub is not None:
            out |= leaf_paths(sub, f"{path}.")
        elif prefix:
            out.setdefault(name, path)
    return out


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = StackConfig
    for part in loc:
        if model is None:
            return None
        model = _fields_of(model).get(str(part))
    return model


def _from_pydantic(err: Any) -> ConfigProblem:
    path = NAMESPACE + ":" + ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        parent, name = err["loc"][:-1], str(err["loc"][-1])
        model = _model_at(parent)
        names = sorted(_fields_of(model)) if model is not None else []
        prefix = ".".join(str(p) for p in parent)
        hint = did_you_mean(name, {n: f"{prefix}.{n}" for n in names})
        fields = f" ({', '.join(names)})" if names else ""
        said = f"{msg[:1].lower()}{msg[1:]}"  # pydantic's "extra inputs are not permitted"
        return ConfigProblem(path, f"{said}; {hint.rstrip() or 'remove it or fix the spelling'}{fields}")
    if err["type"] != "value_error":
        msg = f"{msg[:1].lower()}{msg[1:]}; {_PYDANTIC_FIXES.get(err['type'], 'see stackconfig/config.py')}"
    return ConfigProblem(path, msg)
