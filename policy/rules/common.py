"""Shared reading of resource properties and policy config for trainstack's policies.

Policies read the resource contract in docs/ARCHITECTURE.md. At preview the engine hands them
unknown-checking proxies: reading a value that is an unresolved Output raises `UnknownValueError`.
Every read here turns that (and the engine's raw sentinel strings) into `UNKNOWN`, so a policy can
skip a check it cannot decide yet instead of crashing; the same policy runs again with known values
during `pulumi up`, before the resource is created.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import pydantic
from pulumi_policy import PolicyConfigSchema, ReportViolation
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)

from common import contract

# The tokens are common/contract.py's, the ones the providers declare (the policy pack may read common/).
POD: Final = contract.POD.type
CLUSTER: Final = contract.CLUSTER.type
VOLUME: Final = contract.VOLUME.type
SECRET: Final = contract.SECRET.type
BUCKET: Final = contract.BUCKET.type
COMPUTE_TYPES: Final = (POD, CLUSTER)
RUNPOD_TYPES: Final = (POD, CLUSTER, VOLUME, SECRET)

# Capacity values that may be preempted: `auto` tries spot first (ARCHITECTURE.md).
PREEMPTIBLE: Final = frozenset({"spot", "auto"})

_SENTINELS: Final = frozenset(
    {
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_OBJECT_VALUE,
        UNKNOWN_STRING_VALUE,
    }
)


class Unknown:
    """A value not known until the update runs (an unresolved Output at preview)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown()


class Resource(Protocol):
    """What both `ResourceValidationArgs` and `PolicyResource` offer; policies need no more."""

    resource_type: str
    props: Mapping[str, Any]
    urn: str
    name: str


def _known(value: Any) -> Any:
    return UNKNOWN if isinstance(value, str) and value in _SENTINELS else value


def read(props: Any, *path: str) -> Any:
    """The value at `path`: None when absent (or not a map on the way), UNKNOWN when not yet known."""
    current: Any = props
    for key in path:
        if isinstance(current, Unknown):
            return UNKNOWN
        if not isinstance(current, Mapping):
            return None
        try:
            current = _known(current[key])
        except KeyError:
            return None
        except UnknownValueError:
            return UNKNOWN
    return current


def entries(value: Any) -> list[tuple[str, Any]]:
    """The (key, value) pairs of a map, with unknown values as UNKNOWN; empty for anything else."""
    if not isinstance(value, Mapping):
        return []
    return [(str(key), read(value, key)) for key in value]


def elements(value: Any) -> list[Any]:
    """The items of a list, with unknown items as UNKNOWN; empty for anything else (strings too)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        return []
    found: list[Any] = []
    for index in range(len(value)):
        try:
            found.append(_known(value[index]))
        except UnknownValueError:
            found.append(UNKNOWN)
    return found


def number(value: Any) -> float | None:
    """A finite number from a number or a numeric string (env values are strings); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return result if math.isfinite(result) else None


def text(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value.strip() else None


def truthy(value: Any) -> bool | None:
    """A boolean from a bool or "true"/"false"; None when absent or not known."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def capacity(props: Mapping[str, Any]) -> str | Unknown:
    """The pod's capacity mode; `on_demand` when not set (the contract's default)."""
    value = read(props, "capacity")
    if isinstance(value, Unknown):
        return UNKNOWN
    return (text(value) or "on_demand").strip().lower()


def gpu_total(resource: Resource) -> float | None:
    """GPUs a pod or cluster holds; None when not known."""
    if resource.resource_type == CLUSTER:
        per_pod = number(read(resource.props, "gpu_count_per_pod"))
        pods = number(read(resource.props, "pod_count"))
        return None if per_pod is None or pods is None else per_pod * pods
    return number(read(resource.props, "gpu_count"))


def job_nodes(props: Mapping[str, Any], nodes_env_key: str) -> float | None:
    """How many nodes the pod's training job says it spans (env, e.g. NUM_NODES); None if unsaid."""
    return number(read(props, "env", nodes_env_key))


def of_types(resources: Sequence[Resource], *types: str) -> list[Resource]:
    return [res for res in resources if res.resource_type in types]


def kind(resource: Resource) -> str:
    """A short noun for messages: `pod`, `cluster`, `volume`, `bucket`."""
    return resource.resource_type.rsplit(":", 1)[-1].lower().replace("instantcluster", "cluster")


def usd(amount: float) -> str:
    """Dollars as people write them: $80, $255.36, $1,234.50."""
    if amount == round(amount):
        return f"${amount:,.0f}"
    return f"${amount:,.2f}"


def listing(parts: Sequence[str], limit: int = 6) -> str:
    """`a, b, c` with the tail folded into `and N more` so messages stay readable."""
    shown = ", ".join(parts[:limit])
    rest = len(parts) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


class PolicyConfig(pydantic.BaseModel):
    """Base for each policy's config: frozen, and a misspelt key is an error rather than ignored."""

    # allow_inf_nan=False: a NaN threshold compares false both ways and would wave every stack through.
    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


ConfigT = TypeVar("ConfigT", bound=PolicyConfig)


# id(schema) -> the model it was generated from; the schemas live as long as their policies (module globals).
_SCHEMA_MODELS: dict[int, type[PolicyConfig]] = {}


UNFILLED: Final = "x-trainstack-unfilled"  # json_schema_extra marking a key served without its default


def config_schema(model: type[PolicyConfig]) -> PolicyConfigSchema:
    """The engine-facing schema, generated from the model so defaults are written in one place."""
    properties: dict[str, dict[str, Any]] = {}
    for key, spec in model.model_json_schema()["properties"].items():
        # The engine fills every property's `default` into the config it hands the pack, so a key served
        # with one always reads as written in the file. A key whose being written matters (the run's
        # deprecated caps: only a cap the team wrote competes with the stack's) is served without one.
        unfilled = spec.get(UNFILLED) is True
        skip = {"title", UNFILLED, *(("default",) if unfilled else ())}
        properties[key] = {name: value for name, value in spec.items() if name not in skip}
    schema = PolicyConfigSchema(properties=properties)
    _SCHEMA_MODELS[id(schema)] = model
    return schema


def model_of(schema: PolicyConfigSchema | None) -> type[PolicyConfig] | None:
    """The model `config_schema` built `schema` from (policy/config_file.py checks files with it)."""
    return None if schema is None else _SCHEMA_MODELS.get(id(schema))


README_HINT: Final = "policy/README.md lists every policy and key"
# policy name by config model, for messages (filled by policy/rules/__init__.py from ALL_POLICIES).
_MODEL_NAMES: dict[type[PolicyConfig], str] = {}


def name_models(policies: Sequence[Any]) -> None:
    """Remember each config model's policy name, so a message the pack gives names `<policy>.<key>`."""
    for policy in policies:
        model = model_of(getattr(policy, "config_schema", None))
        if model is not None:
            # One model per policy: a model two policies shared would name only one of them.
            assert _MODEL_NAMES.setdefault(model, policy.name) == policy.name, (model, policy.name)


def validated(model: type[ConfigT], settings: Mapping[str, Any]) -> ConfigT:
    """A policy's settings judged the one way both the checker (`python -m policy.config_file`) and the pack
    judge them: as the JSON they are, strictly, so `true` and `"5"` are not numbers and a list is
    not a string, as the engine's own schema check (generated from the same model) would also say. A whole
    float is read as the integer it is: the engine hands the pack every number as a double (protobuf's
    Struct), and JSON Schema's "integer" takes 1.0 too."""
    return model.model_validate_json(json.dumps(_whole(dict(settings))), strict=True)


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_whole(item) for item in value]
    return value


# Fixes for a value of the wrong JSON type (strict: nothing is coerced, as the engine's schema check).
_TYPE_FIXES: Final = {
    "float_type": "write a number, without quotes",
    "int_type": "write a whole number, without quotes",
    "int_from_float": "write a whole number",
    "bool_type": "write true or false, without quotes",
    "string_type": "write a string in double quotes",
    "list_type": 'write a list, e.g. ["a", "b"]',
    "tuple_type": 'write a list, e.g. ["a", "b"]',
    "literal_error": "use one of the values named",
    "finite_number": "write a finite number",
}


def settings_problems(name: str, model: type[PolicyConfig], settings: Mapping[str, Any]) -> list[str]:
    """Every problem in one policy's settings, each `<policy>.<key>: <what is wrong>; <fix> (README)`."""
    try:
        validated(model, settings)
    except pydantic.ValidationError as exc:
        out = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(settings)"
            fix = _TYPE_FIXES.get(str(err["type"]), "fix the value")
            if err["type"] == "extra_forbidden":
                near = difflib.get_close_matches(key, list(model.model_fields), n=1)
                fix = f"did you mean {near[0]!r}?" if near else "remove it or fix the spelling"
            msg = str(err["msg"])
            out.append(f"{name}.{key}: {msg[:1].lower()}{msg[1:]}; {fix} ({README_HINT})")
        return out
    return []


def load_config(model: type[ConfigT], given: Mapping[str, Any], report: ReportViolation) -> ConfigT | None:
    """The policy's config with defaults filled in; reports and returns None when it is invalid, with the
    message `python -m policy.config_file` gives for the same file."""
    settings = dict(given)
    try:
        return validated(model, settings)
    except (pydantic.ValidationError, TypeError, ValueError):
        problems = settings_problems(_MODEL_NAMES.get(model, "(policy)"), model, settings) or [
            "(settings): not JSON values; fix the file"
        ]
        report(
            f"policy config is invalid: {'; '.join(problems)}. Fix the file passed with --policy-pack-config "
            "(policy/config/<stack>.json) and check it with `python -m policy.config_file <file>`.",
            None,
        )
        return None


RUN_CAP_KEY: Final = "trainstack:run.max_cost_usd"
STACK_COMPONENT: Final = contract.COMPONENT_TYPE


def stack_run_cap(resources: Sequence[Resource]) -> float | None:
    """The run's one cost cap from the stack config (`trainstack:run.max_cost_usd`, the H100Cluster's
    `run_cost_cap_usd` output), or None when the stack sets none: the policy config's own key then stands."""
    for res in resources:
        if res.resource_type == STACK_COMPONENT:
            cap = number(read(res.props, "run_cost_cap_usd"))
            if cap:
                return cap
    return None


@dataclass(frozen=True)
class RunCap:
    """The run cost cap a policy holds a stack to, and how its message names it."""

    usd: float
    key: str  # what to raise, as the message says it
    why: str  # "" when one cap applies; else which of two held and why, for the message


def run_cap(resources: Sequence[Resource], policy_key: str, policy_usd: float, policy_set: bool) -> RunCap:
    """The stricter of the stack's one cap and the policy config's own (deprecated) key, when the file sets
    that key (a team that wrote a lower cap meant it); the stack's cap alone when the file leaves
    the key at its default; the policy's own value when the stack sets no cap."""
    own = RunCap(policy_usd, f"`{policy_key}` in the policy config", "")
    stack = stack_run_cap(resources)
    if stack is None:
        return own
    if not policy_set:
        return RunCap(stack, RUN_CAP_KEY, "")
    if policy_usd < stack:
        why = (
            f" (two caps apply and the stricter holds: `{policy_key}` in the policy config, "
            f"{usd(policy_usd)}, is under {RUN_CAP_KEY}, {usd(stack)})"
        )
        return RunCap(policy_usd, own.key, why)
    why = (
        f" (two caps apply and the stricter holds: {RUN_CAP_KEY}, {usd(stack)}, is at or under "
        f"`{policy_key}` in the policy config, {usd(policy_usd)})"
    )
    return RunCap(stack, RUN_CAP_KEY, why)
