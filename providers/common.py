"""Input handling shared by every provider package: validation that tolerates unknowns at preview."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pulumi.dynamic import CheckFailure
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pydantic import BaseModel, ConfigDict, ValidationError

UNKNOWN = rpc.UNKNOWN  # how Pulumi marks a value another resource has not computed yet
PROVIDER_KEY = "__provider"  # the pickled provider Pulumi stores beside the inputs


class InputModel(BaseModel):
    """Base of resource input models: unknown keys are typos, rejected so the failure names the field."""

    # Built on first use (the provider's check), not when the Pulumi program imports the resource classes.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def rule_failures(self) -> list[tuple[str, str]]:
        """Cross-field rules as (field, fix) pairs, so each failure names the field to change."""
        return []


A = TypeVar("A", bound=InputModel)


def is_unknown(value: Any) -> bool:
    """An input not computed yet. The dynamic-provider host hands these over as `pulumi.output.Unknown`
    objects at preview (seen with pulumi 3.272); older hosts used the `rpc.UNKNOWN` sentinel string."""
    return isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN)


def contains_unknown(value: Any) -> bool:
    """Whether the value, or anything nested in it, is not computed yet."""
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(contains_unknown(v) for v in value)
    return False


def args_of(model: type[A], props: Mapping[str, Any]) -> A:
    """The validated model from checked inputs or state (which also hold computed keys)."""
    return model.model_validate({k: v for k, v in props.items() if k in model.model_fields})


def _failures(exc: ValidationError) -> list[CheckFailure]:
    out = []
    for err in exc.errors():
        if is_unknown(err.get("input")):
            continue  # a value computed by another resource: validated on the real run
        prop = ".".join(str(p) for p in err["loc"]) or "(resource)"
        reason = "unknown property; check the spelling" if err["type"] == "extra_forbidden" else err["msg"]
        out.append(CheckFailure(prop, reason))  # never echo the input: it may be a secret
    return out


def validate_inputs(
    model_cls: type[A], news: Mapping[str, Any], skip: frozenset[str] | set[str]
) -> tuple[A | None, dict[str, Any], list[CheckFailure]]:
    """Validate raw inputs, tolerating unknowns; returns (model or None, values to keep, failures).

    `values` are the normalised inputs (defaults filled in) with unknown values kept as unknown; the
    model is None when some input is still unknown or invalid.
    """
    raw = {k: v for k, v in news.items() if k not in skip}
    unknown = {k for k, v in raw.items() if contains_unknown(v)}
    try:
        model = model_cls.model_validate({k: v for k, v in raw.items() if k not in unknown})
    except ValidationError as exc:
        failures = [f for f in _failures(exc) if f.property.split(".")[0] not in unknown]
        if failures:
            return None, raw, failures
        defaults = {
            k: f.get_default(call_default_factory=True)
            for k, f in model_cls.model_fields.items()
            if not f.is_required()
        }
        return None, {**defaults, **raw}, []
    rules = [CheckFailure(p, r) for p, r in model.rule_failures()]
    if rules:
        return model, raw, rules
    values = {**model.model_dump(), **{k: raw[k] for k in unknown}}
    return (None if unknown else model), values, []
