"""The one resource base: typed inputs in, outputs declared once, the provider built per resource.

Components build a frozen `*Inputs` dataclass (mypy checks every field, as in Pulumi's generated SDKs) and
hand it to the resource class; only `to_props()` turns it into the string-keyed map the engine stores, so no
`dict[str, Any]` crosses from components/ into providers/. `None` means "the provider's default" and is left
out, so the defaults stay written once, on the provider's input model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, ClassVar

import pulumi
from pulumi.dynamic import Resource, ResourceProvider

from common.contract import COST_KEYS

__all__ = ["COST_KEYS", "ResourceInputs", "TypedResource"]


class ResourceInputs:
    """Mixin for the frozen dataclasses resources take; nested inputs become nested maps."""

    def to_props(self) -> dict[str, Any]:
        assert is_dataclass(self), f"{type(self).__name__} must be a dataclass"
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = value.to_props() if isinstance(value, ResourceInputs) else value
        return out


class TypedResource(Resource):
    """Base of trainstack's dynamic resources. Subclasses name their provider, their computed outputs
    (declared as None inputs, so Pulumi returns them) and, where they have one, the secret outputs."""

    provider_factory: ClassVar[Callable[[], ResourceProvider]]
    output_names: ClassVar[tuple[str, ...]] = ()
    secret_outputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, inputs: ResourceInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {**dict.fromkeys(self.output_names), **self.props_of(inputs)}
        if self.secret_outputs:
            hidden = pulumi.ResourceOptions(additional_secret_outputs=list(self.secret_outputs))
            opts = pulumi.ResourceOptions.merge(opts, hidden)
        super().__init__(type(self).provider_factory(), name, props, opts)

    def props_of(self, inputs: ResourceInputs) -> dict[str, Any]:
        """The engine-facing inputs; a subclass may wrap some (e.g. as Pulumi secrets)."""
        return inputs.to_props()
