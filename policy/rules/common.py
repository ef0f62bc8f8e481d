"""Shared reading of resource properties and policy config for trainstack's policies.

Policies read the resource contract in docs/ARCHITECTURE.md. At preview the engine hands them
unknown-checking proxies: reading a value that is an unresolved Output raises `UnknownValueError`.
Every read here turns that (and the engine's raw sentinel strings) into `UNKNOWN`, so a policy can
skip a check it cannot decide yet instead of crashing; the same policy runs again with known values
during `pulumi up`, before the resource is created.
"""

from __future__ import annotations

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

POD: Final = "pulumi-python:dynamic/runpod:Pod"
CLUSTER: Final = "pulumi-python:dynamic/runpod:InstantCluster"
VOLUME: Final = "pulumi-python:dynamic/runpod:NetworkVolume"
SECRET: Final = "pulumi-python:dynamic/runpod:Secret"  # noqa: S105 (a type token)
BUCKET: Final = "pulumi-python:dynamic/s3:CheckpointBucket"
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


def config_schema(model: type[PolicyConfig]) -> PolicyConfigSchema:
    """The engine-facing schema, generated from the model so defaults are written in one place."""
    properties: dict[str, dict[str, Any]] = {}
    for key, spec in model.model_json_schema()["properties"].items():
        properties[key] = {name: value for name, value in spec.items() if name != "title"}
    schema = PolicyConfigSchema(properties=properties)
    _SCHEMA_MODELS[id(schema)] = model
    return schema


def model_of(schema: PolicyConfigSchema | None) -> type[PolicyConfig] | None:
    """The model `config_schema` built `schema` from (policy/config_file.py checks files with it)."""
    return None if schema is None else _SCHEMA_MODELS.get(id(schema))


def load_config(model: type[ConfigT], given: Mapping[str, Any], report: ReportViolation) -> ConfigT | None:
    """The policy's config with defaults filled in; reports and returns None when it is invalid."""
    try:
        return model.model_validate(dict(given))
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc']) or '(root)'}: {problem['msg']}"
            for problem in error.errors()
        )
        report(
            f"policy config is invalid ({problems}). Fix the file passed with --policy-pack-config "
            "(policy/config/<stack>.json); policy/README.md lists every key.",
            None,
        )
        return None


RUN_CAP_KEY: Final = "trainstack:run.max_cost_usd"
STACK_COMPONENT: Final = "trainstack:index:H100Cluster"


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
    that key (issue #49: a team that wrote a lower cap meant it); the stack's cap alone when the file leaves
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
