"""Parse `pulumi preview` JSON (plain or streaming events) and `pulumi stack export` into typed records.

Pure: no subprocess, no files. Every value that could be a secret is masked here, before any record
exists, so no later stage can print one (see `mask`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common import contract
from common.contract import COST_KEYS
from common.outputs import ContractError, ForecastOutput
from facts import secrets

# Pulumi's marker key for a secret value: a well-known constant of the state format, not a credential.
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # noqa: S105
MASKED = "[secret]"
UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's "known after apply" value
UNKNOWN = "(known after apply)"
# Steps that are the halves of a replace: the `replace` step itself carries the change.
_REPLACE_HALVES = frozenset({"create-replacement", "delete-replaced", "discard-replaced"})
_IGNORED_PROPS = frozenset({"__provider"})
# Names that hold credentials when someone puts a plaintext value in env by mistake; the policy pack flags
# it, and the report must not repeat the value in a pull request comment.
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY)$", re.IGNORECASE)
# The secret's value, and the salted hash the provider keeps to see it change: neither goes in a comment.
_ALWAYS_SECRET = {
    contract.SECRET.type: frozenset({"value", "value_hash"}),
    contract.SECRETS_FILE.type: frozenset({"values", "values_hash"}),  # a node's secrets (issue #67)
}


class PreviewParseError(ValueError):
    """The preview output is not what `pulumi preview --json` writes; the message says what is missing."""


@dataclass(frozen=True)
class PropertyChange:
    """One changed property, by dotted path, with both sides already masked and printable."""

    path: str  # "pod_count", "env.NUM_NODES", "ports[0]"
    before: str | None  # None: the property did not exist before
    after: str | None  # None: the property is removed
    forces_replace: bool  # named by the provider's diff as the reason for a replace


@dataclass(frozen=True)
class ResourceChange:
    """One resource the preview would touch (or leave alone: op `same`)."""

    urn: str
    name: str  # the logical name, the last URN segment
    type: str  # the full type token
    op: str  # create / update / replace / delete / same / read / ...
    changes: tuple[PropertyChange, ...]
    # A pod's or cluster's `availability` input: its stock read at preview (providers/runpod/capacity.py).
    availability: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ResourceCost:
    """What one billable resource costs on one side of the change (None where unknown at preview)."""

    urn: str
    name: str
    type: str
    cost_per_hour: float | None  # USD/h for compute, as the provider computed it in check()
    storage_cost_per_month: float | None  # USD/month
    run_hours: float | None  # the resource's own `training.max_run_hours`, if it declares one


@dataclass(frozen=True)
class PolicyViolation:
    """One policy result the engine reported (a stack policy has no resource)."""

    policy: str
    pack: str
    level: str  # mandatory / advisory / remediate
    resource: str | None  # the logical name, or None for a stack-level policy
    message: str


@dataclass(frozen=True)
class Preview:
    """Everything the report needs from one preview run of one stack."""

    changes: tuple[ResourceChange, ...]
    after: tuple[ResourceCost, ...]
    violations: tuple[PolicyViolation, ...]
    diagnostics: tuple[str, ...]  # warnings and errors, "<severity>: <message>"
    config_run_hours: float | None  # `<project>:training.max_run_hours` from the stack config
    failed: bool  # the engine said the preview failed (policy or otherwise)
    forecast: ForecastOutput | None = None  # the stack output `forecast` after the change (docs/FORECAST.md)
    alerts: Mapping[str, Any] | None = None  # the stack output `alerts` after the change (docs/MONITORING.md)


# --- masking ---------------------------------------------------------------------------------------


def is_secret(value: Any) -> bool:
    return (isinstance(value, Mapping) and SECRET_SIG in value) or value == MASKED


def mask(value: Any, key: str = "") -> Any:
    """A copy of `value` with every secret (marker, `[secret]`, or a credential-named plaintext) masked."""
    if is_secret(value):
        return MASKED
    if isinstance(value, Mapping):
        return {str(k): mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, key) for v in value]
    if isinstance(value, str) and value and _SECRET_NAME.search(key) and not secrets.is_reference(value):
        return MASKED
    return value


def show(value: Any) -> str:
    """One masked value as compact text for a table cell."""
    if value == UNKNOWN_SENTINEL:
        return UNKNOWN
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


# --- property diffs --------------------------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def flatten(props: Mapping[str, Any]) -> dict[str, Any]:
    """`{"env": {"A": "1"}}` -> `{"env.A": "1"}`; lists of scalars stay whole (a list is one value)."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key not in _IGNORED_PROPS:
            _flatten(value, str(key), out)
    return out


def diff_props(
    type_: str, old: Mapping[str, Any], new: Mapping[str, Any], replace_keys: Iterable[str]
) -> tuple[PropertyChange, ...]:
    """Changed properties between two input maps, masked; `replace_keys` marks the replace reasons."""
    secret_keys = _ALWAYS_SECRET.get(type_, frozenset())
    olds = flatten(mask({k: (MASKED if k in secret_keys else v) for k, v in old.items()}))
    news = flatten(mask({k: (MASKED if k in secret_keys else v) for k, v in new.items()}))
    reasons = set(replace_keys)
    changes = []
    # A map or list whose new value is unknown at preview (a delivery's `files`, from nodes being replaced)
    # is one value known after apply, not each of its old entries removed (issue #68: 35 `files.* →
    # (removed)` lines read as code being deleted).
    for root in [p for p, v in news.items() if v == UNKNOWN_SENTINEL]:
        under = [p for p in olds if p.startswith((f"{root}.", f"{root}["))]
        if under:
            for p in under:
                del olds[p]
            changes.append(
                PropertyChange(
                    path=root,
                    before=f"({len(under)} values)",
                    after=UNKNOWN,
                    forces_replace=_root(root) in reasons or root in reasons,
                )
            )
            del news[root]
    for path in sorted(set(olds) | set(news)):
        before, after = olds.get(path), news.get(path)
        # Masked on both sides: Pulumi does not tell us whether the secret changed unless it names it.
        same = before == after and not (before == MASKED and _root(path) in reasons)
        if same:
            continue
        changes.append(
            PropertyChange(
                path=path,
                before=None if path not in olds else show(before),
                after=None if path not in news else show(after),
                forces_replace=_root(path) in reasons or path in reasons,
            )
        )
    return tuple(sorted(changes, key=lambda c: c.path))


def _root(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


# --- steps -------------------------------------------------------------------------------------------


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _inputs(state: Mapping[str, Any] | None) -> dict[str, Any]:
    """A state's checked inputs (costs included: check() computes them), else its outputs.

    Inputs, not outputs, on both sides: at preview an update's new outputs are empty, and outputs the
    provider adds (status, ids) would show as removed.
    """
    if not state:
        return {}
    return dict(state.get("inputs") or state.get("outputs") or {})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # unknown at preview, secret, or absent
    return float(value)


def cost_of(urn: str, type_: str, props: Mapping[str, Any]) -> ResourceCost | None:
    """The cost record of a resource that keeps the cost contract; None for one that carries no cost."""
    if not any(k in props for k in COST_KEYS):
        return None
    training = props.get("training")
    hours = _number(training.get("max_run_hours")) if isinstance(training, Mapping) else None
    return ResourceCost(
        urn=urn,
        name=_name(urn),
        type=type_,
        cost_per_hour=_number(props.get("cost_per_hour", 0.0)),
        storage_cost_per_month=_number(props.get("storage_cost_per_month", 0.0)),
        run_hours=hours,
    )


def _step(raw: Mapping[str, Any]) -> tuple[ResourceChange, ResourceCost | None] | None:
    """One step (a plain `steps[]` entry or a streaming `resourcePreEvent.metadata`) as records."""
    op = str(raw.get("op", ""))
    urn = str(raw.get("urn", ""))
    if not op or not urn:
        raise PreviewParseError("a preview step has no `op` or `urn`")
    if op in _REPLACE_HALVES:
        return None
    old = raw.get("oldState") if "oldState" in raw else raw.get("old")
    new = raw.get("newState") if "newState" in raw else raw.get("new")
    type_ = str(raw.get("type") or (new or old or {}).get("type") or "")
    if type_.startswith("pulumi:providers:") or type_ == "pulumi:pulumi:Stack":
        return None
    reasons = [*(raw.get("replaceReasons") or []), *(raw.get("keys") or [] if op == "replace" else [])]
    old_props, new_props = _inputs(old), _inputs(new)
    changes = () if op in ("same", "delete") else diff_props(type_, old_props, new_props, reasons)
    stock = new_props.get("availability") if op != "delete" else None
    change = ResourceChange(
        urn=urn,
        name=_name(urn),
        type=type_,
        op=op,
        changes=changes,
        availability=stock if isinstance(stock, Mapping) else None,
    )
    # Only custom resources bill; the stack and components may re-export a total (it would count twice).
    custom = bool((new or old or {}).get("custom"))
    cost = None if op == "delete" or not custom else cost_of(urn, type_, new_props)
    return change, cost


def _config_run_hours(config: Mapping[str, Any]) -> float | None:
    """`<project>:training` (structured config arrives as a JSON string) -> its `max_run_hours`."""
    for key, raw in config.items():
        if not str(key).endswith(":training") or is_secret(raw):
            continue
        value = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(value, Mapping):
            return _number(value.get("max_run_hours"))
    return None


def _diagnostic(raw: Mapping[str, Any]) -> str | None:
    severity = str(raw.get("severity", ""))
    message = str(raw.get("message", "")).strip()
    # "preview failed" only repeats what the summary (and any policy violation) already says.
    if severity not in ("warning", "error") or message == "preview failed":
        return None
    return f"{severity}: {message}"


def _violation(raw: Mapping[str, Any]) -> PolicyViolation:
    urn = str(raw.get("resourceUrn") or "")
    on_stack = not urn or "::pulumi:pulumi:Stack::" in urn
    return PolicyViolation(
        policy=str(raw.get("policyName", "?")),
        pack=str(raw.get("policyPackName", "?")),
        level=str(raw.get("enforcementLevel", "advisory")),
        resource=None if on_stack else _name(urn),
        message=str(raw.get("message", "")).strip(),
    )


def _stack_output(metadata: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The stack output `key` (a mapping) from a resOutputsEvent of the stack; None for any other event."""
    new = metadata.get("new") or {}
    if new.get("type") != "pulumi:pulumi:Stack":
        return None
    value = (new.get("outputs") or {}).get(key)
    return mask(value) if isinstance(value, Mapping) else None


def _dedupe(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


def parse_events(lines: Iterable[str]) -> Preview:
    """Records from the streaming form (`PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true`): one event a line."""
    changes: list[ResourceChange] = []
    after: list[ResourceCost] = []
    violations: list[PolicyViolation] = []
    diagnostics: list[str] = []
    config: Mapping[str, Any] = {}
    forecast: Mapping[str, Any] | None = None  # as the events carry it: parsed once, below
    alerts: Mapping[str, Any] | None = None
    failed, summarised = False, False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise PreviewParseError(f"event line {number} is not JSON") from None
        if "resourcePreEvent" in event:
            parsed = _step(event["resourcePreEvent"].get("metadata") or {})
            if parsed:
                changes.append(parsed[0])
                after.extend([parsed[1]] if parsed[1] else [])
        elif "resOutputsEvent" in event:
            metadata = event["resOutputsEvent"].get("metadata") or {}
            forecast = _stack_output(metadata, "forecast") or forecast
            alerts = _stack_output(metadata, "alerts") or alerts
        elif "policyEvent" in event:
            violations.append(_violation(event["policyEvent"]))
        elif "diagnosticEvent" in event:
            text = _diagnostic(event["diagnosticEvent"])
            diagnostics.extend([text] if text else [])
        elif "preludeEvent" in event:
            config = event["preludeEvent"].get("config") or {}
        elif "summaryEvent" in event:
            summarised = True
            failed = event["summaryEvent"].get("result") not in (None, "succeeded")
    if not summarised:
        raise PreviewParseError("the event stream has no summaryEvent: the preview did not finish")
    # The engine steps resources in parallel: sort so that one preview always gives one report.
    return Preview(
        changes=tuple(sorted(changes, key=lambda c: c.urn)),
        after=tuple(sorted(after, key=lambda c: c.urn)),
        violations=tuple(sorted(_dedupe(violations), key=lambda v: (v.policy, v.resource or "", v.message))),
        diagnostics=_dedupe(diagnostics),
        config_run_hours=_config_run_hours(config),
        failed=failed,
        forecast=forecast_output(forecast, "the preview's stack output"),
        alerts=alerts,
    )


def parse_plain(document: Mapping[str, Any]) -> Preview:
    """Records from plain `pulumi preview --json` (no policy results in this form)."""
    if "steps" not in document and "diagnostics" not in document:
        raise PreviewParseError("not a `pulumi preview --json` document: no `steps` and no `diagnostics`")
    changes: list[ResourceChange] = []
    after: list[ResourceCost] = []
    for raw in document.get("steps") or []:
        parsed = _step(raw)
        if parsed:
            changes.append(parsed[0])
            after.extend([parsed[1]] if parsed[1] else [])
    diagnostics = [d for d in map(_diagnostic, document.get("diagnostics") or []) if d]
    return Preview(
        changes=tuple(sorted(changes, key=lambda c: c.urn)),
        after=tuple(sorted(after, key=lambda c: c.urn)),
        violations=(),
        diagnostics=_dedupe(diagnostics),
        config_run_hours=_config_run_hours(document.get("config") or {}),
        failed=any(d.get("severity") == "error" for d in document.get("diagnostics") or []),
    )


def parse_export(document: Mapping[str, Any]) -> tuple[ResourceCost, ...]:
    """The current (before) costs from `pulumi stack export`: each resource's outputs over its inputs."""
    deployment = document.get("deployment")
    if not isinstance(deployment, Mapping):
        raise PreviewParseError("not a `pulumi stack export` document: no `deployment`")
    costs = []
    for raw in deployment.get("resources") or []:
        type_ = str(raw.get("type", ""))
        if type_.startswith("pulumi:providers:") or raw.get("delete") or not raw.get("custom"):
            # A replaced resource awaiting deletion is counted once, by its replacement; the stack and
            # components may re-export a total, which would count twice.
            continue
        props = {**(raw.get("inputs") or {}), **(raw.get("outputs") or {})}
        cost = cost_of(str(raw.get("urn", "")), type_, props)
        costs.extend([cost] if cost else [])
    return tuple(sorted(costs, key=lambda c: c.urn))


def export_forecast(document: Mapping[str, Any]) -> ForecastOutput | None:
    """The stack output `forecast` in `pulumi stack export` (the before side); None when it has none."""
    return forecast_output(export_output(document, "forecast"), "the stack's state (pulumi stack export)")


def forecast_output(raw: Mapping[str, Any] | None, where: str) -> ForecastOutput | None:
    """The stack output `forecast` parsed once, into common/outputs.py's record (None: the stack has no
    training.model); PreviewParseError naming `where` and the field when it does not parse."""
    if raw is None:
        return None
    try:
        return ForecastOutput.from_output(raw)
    except ContractError as exc:
        raise PreviewParseError(f"{where}: {exc}") from None


def export_output(document: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The stack output `key` (a mapping) in `pulumi stack export`; None when it has none."""
    deployment = document.get("deployment")
    for raw in deployment.get("resources") or [] if isinstance(deployment, Mapping) else []:
        if raw.get("type") == "pulumi:pulumi:Stack":
            value = (raw.get("outputs") or {}).get(key)
            return mask(value) if isinstance(value, Mapping) else None
    return None
