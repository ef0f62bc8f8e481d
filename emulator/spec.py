"""RunPod's v2 OpenAPI document, read at run time: request validation and path templates."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from emulator.problems import ApiError

_SPEC_URI = "urn:runpod:openapi-v2"
_METHODS = ("get", "put", "post", "patch", "delete")


@dataclass(frozen=True)
class Operation:
    """One documented operation: its id, path template and query parameter schemas."""

    operation_id: str
    method: str
    template: str
    pattern: re.Pattern[str]
    query: dict[str, dict[str, Any]] = field(default_factory=dict)


def _compile(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]+\}", template)
    return re.compile("^" + "[^/]+".join(re.escape(p) for p in parts) + "$")


def _error_text(error: ValidationError) -> str:
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}"


class Spec:
    """The loaded document; validators are built once per schema name."""

    def __init__(self, path: Path) -> None:
        try:
            self.document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise SystemExit(
                f"RunPod's REST v2 spec (openapi-v2.json) not found at {path}: save RunPod's published v2 "
                "OpenAPI document (api-reference-v2/openapi.json in RunPod's docs) as "
                "~/.cache/trainstack/openapi-v2.json or point TRAINSTACK_OPENAPI_V2 at it"
            ) from exc
        _ecma_whitespace(self.document)
        resource = Resource.from_contents(self.document, default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(_SPEC_URI, resource)
        self._validators: dict[str, Draft202012Validator] = {}
        self.operations = self._operations()

    def _operations(self) -> list[Operation]:
        found = []
        for template, item in self.document["paths"].items():
            for method in _METHODS:
                op = item.get(method)
                if op is None:
                    continue
                params = [self._deref(p) for p in item.get("parameters", []) + op.get("parameters", [])]
                query = {p["name"]: p for p in params if p.get("in") == "query"}
                found.append(
                    Operation(op["operationId"], method.upper(), template, _compile(template), query)
                )
        # Literal paths win over templated ones (`/v2/registries/delegations` before `/{id}`).
        found.sort(key=lambda o: (o.template.count("{"), -len(o.template)))
        return found

    def _deref(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if ref is None:
            return node
        target: Any = self.document
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        return dict(target)

    def route(self, path: str) -> tuple[str, list[str]] | None:
        """The most specific documented template the path matches, and the methods it documents."""
        template = next((op.template for op in self.operations if op.pattern.match(path)), None)
        if template is None:
            return None
        return template, [op.method for op in self.operations if op.template == template]

    def match(self, method: str, path: str) -> Operation | None:
        found = self.route(path)
        if found is None:
            return None
        return next((op for op in self.operations if op.template == found[0] and op.method == method), None)

    def template(self, method: str, path: str) -> str:
        """`METHOD /templated/path` for counters; unknown paths are kept literal."""
        op = self.match(method, path)
        return f"{method} {op.template if op else path}"

    def validator(self, schema_name: str) -> Draft202012Validator:
        if schema_name not in self._validators:
            schema = {"$ref": f"{_SPEC_URI}#/components/schemas/{schema_name}"}
            self._validators[schema_name] = Draft202012Validator(schema, registry=self._registry)
        return self._validators[schema_name]

    def schema_errors(self, schema_name: str, value: Any) -> list[str]:
        texts = (self._clear_text(e) for e in self.validator(schema_name).iter_errors(value))
        return sorted(t for t in texts if t)

    def _clear_text(self, error: ValidationError) -> str | None:
        """Name only truly unknown fields: when a subschema fails, JSON Schema also reports its known
        fields as "unevaluated", which would send a user hunting for a typo that is not there."""
        if error.validator != "unevaluatedProperties" or not isinstance(error.instance, dict):
            return _error_text(error)
        unknown = sorted(set(error.instance) - self._declared(error.schema))
        if not unknown:
            return None  # a consequence of another error, which is reported on its own
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        return f"{where}: unknown field(s) {', '.join(map(repr, unknown))}"

    def _declared(self, schema: Any) -> set[str]:
        if not isinstance(schema, dict):
            return set()
        names = set(schema.get("properties", {}))
        for part in schema.get("allOf", []):
            names |= self._declared(part)
        if "$ref" in schema:
            names |= self._declared(self._deref({"$ref": schema["$ref"].removeprefix(_SPEC_URI)}))
        return names

    def check_body(self, schema_name: str, value: Any) -> dict[str, Any]:
        """The body if it matches the schema; otherwise 422 listing every violation."""
        validator = self.validator(schema_name)
        if validator.is_valid(value):
            assert isinstance(value, dict)  # every request schema here is an object
            return value
        errors = self.schema_errors(schema_name, value) or sorted(
            map(_error_text, validator.iter_errors(value))
        )
        raise ApiError(422, f"the request body does not match {schema_name}", errors=errors)

    def check_query(self, op: Operation, raw: dict[str, str]) -> dict[str, Any]:
        """Parse documented query parameters (form style, comma lists) and validate them."""
        parsed: dict[str, Any] = {}
        errors: list[str] = []
        for name, param in op.query.items():
            if name not in raw:
                continue
            schema = param.get("schema", {})
            value = _coerce(raw[name], self._deref(schema))
            validator = Draft202012Validator(_absolute(schema), registry=self._registry)
            errors.extend(f"query {name}: {e.message}" for e in validator.iter_errors(value))
            parsed[name] = value
        if errors:
            raise ApiError(422, "query parameters do not match the contract", errors=sorted(errors))
        return parsed


# ECMA-262's \s (what OpenAPI's JSON Schema patterns mean): its WhiteSpace and LineTerminator code points.
# Python's \s also matches U+001C-U+001F and U+0085, so `[^\s]` would refuse keys RunPod accepts.
_ECMA_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def _ecma_whitespace(node: Any) -> None:
    r"""Rewrite `\s` inside pattern character classes to ECMA-262's set, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                node[key] = value.replace("[^\\s]", f"[^{_ECMA_SPACE}]")
            else:
                _ecma_whitespace(value)
    elif isinstance(node, list):
        for value in node:
            _ecma_whitespace(value)


def _absolute(schema: Any) -> Any:
    """Point document-relative `#/...` refs at the registered spec so a fragment validates alone."""
    if isinstance(schema, dict):
        return {
            k: (f"{_SPEC_URI}{v}" if k == "$ref" and str(v).startswith("#") else _absolute(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_absolute(v) for v in schema]
    return schema


def _coerce(text: str, schema: dict[str, Any]) -> Any:
    """Query strings are text; turn them into what the schema types describe, or leave as text."""
    kind = schema.get("type")
    if kind == "array":
        # Form style, explode=false: `?x=` is one empty item (it could also be read as the empty list;
        # RunPod's text does not say), which fails an enum or pattern.
        return text.split(",")
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    return text
