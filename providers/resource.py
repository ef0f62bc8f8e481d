"""The one resource base: typed inputs in, outputs declared once, the provider built per resource; and the
one provider base (`CheckedProvider`): check and diff written once for RunPod, S3 and delivery.

Components build a frozen `*Inputs` dataclass (mypy checks every field, as in Pulumi's generated SDKs) and
hand it to the resource class; only `to_props()` turns it into the string-keyed map the engine stores, so no
`dict[str, Any]` crosses from components/ into providers/. `None` means "the provider's default" and is left
out, so the defaults stay written once, on the provider's input model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any, ClassVar

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, DiffResult, Resource, ResourceProvider

from common.contract import COST_KEYS
from providers.common import PROVIDER_KEY, InputModel, contains_unknown, validate_inputs

__all__ = ["COST_KEYS", "CheckedProvider", "ResourceInputs", "TypedResource"]


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
    """Base of trainstack's dynamic resources. Subclasses name their provider, declare each output once, as
    a `pulumi.Output[...]` attribute, and, where they have them, the secret outputs.

    The attributes are the one list: from them the class takes `output_names` (declared as None inputs, so
    Pulumi returns them) and gives its provider `declared_outputs` (all of them) and `output_keys`, the
    outputs that are not inputs (the provider's `args_model` fields) or check()'s `computed_keys`, which diff
    ignores and which create/read/update return through `CheckedProvider.outputs`."""

    provider_factory: ClassVar[Callable[[], ResourceProvider]]
    output_names: ClassVar[tuple[str, ...]] = ()
    secret_outputs: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls).get("__annotations__", {})
        cls.output_names = tuple(k for k, kind in own.items() if str(kind).startswith("pulumi.Output["))
        provider = vars(cls).get("provider_factory")
        if isinstance(provider, type) and issubclass(provider, CheckedProvider):
            inputs = {*provider.args_model.model_fields, *provider.computed_keys}
            provider.declared_outputs = frozenset(cls.output_names)
            provider.output_keys = frozenset(cls.output_names) - inputs

    def __init__(self, name: str, inputs: ResourceInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {**dict.fromkeys(self.output_names), **self.props_of(inputs)}
        if self.secret_outputs:
            hidden = pulumi.ResourceOptions(additional_secret_outputs=list(self.secret_outputs))
            opts = pulumi.ResourceOptions.merge(opts, hidden)
        super().__init__(type(self).provider_factory(), name, props, opts)

    def props_of(self, inputs: ResourceInputs) -> dict[str, Any]:
        """The engine-facing inputs; a subclass may wrap some (e.g. as Pulumi secrets)."""
        return inputs.to_props()


class CheckedProvider(ResourceProvider):
    """Check and diff as every trainstack provider does them; subclasses declare the class attributes and
    implement the verbs.

    - `check` validates the inputs with `args_model` (unknowns tolerated at preview, each failure naming its
      field and never echoing the value), then asks `transition_failures` (rules against the previous
      inputs) and `known_failures` (rules that need a lookup); on success it adds `computed(values)`.
    - `diff` compares inputs only (never `output_keys`, `computed_keys` or the pickled provider), with
      `same` deciding equality; a change of one of `replace_keys` replaces the resource, deleting first
      when `delete_before_replace` says so.
    """

    args_model: ClassVar[type[InputModel]]
    replace_keys: ClassVar[frozenset[str]] = frozenset()  # changing these forces a replacement
    output_keys: ClassVar[frozenset[str]] = frozenset()  # computed by create/read; ignored by diff
    declared_outputs: ClassVar[frozenset[str]] = frozenset()  # its resource's `pulumi.Output` attributes
    computed_keys: ClassVar[frozenset[str]] = frozenset()  # added by check (e.g. COST_KEYS); not inputs
    delete_before_replace: ClassVar[bool] = False

    def ignored_keys(self) -> frozenset[str]:
        return frozenset({*self.output_keys, *self.computed_keys, PROVIDER_KEY})

    def outputs(self, carried: Mapping[str, Any], **computed: Any) -> dict[str, Any]:
        """The outs create, read and update return: the inputs `carried` over and the `computed` outputs,
        which must be the resource's declared outputs: every one of `output_keys`, and besides them only
        declared outputs that are also inputs (a data center RunPod chose, the endpoint used). A provider
        that returns a key its resource does not declare, or misses one it declares, is a bug: TypeError
        naming the keys, at the first create or read that returns them."""
        undeclared = sorted(set(computed) - self.declared_outputs)
        missing = sorted(self.output_keys - set(computed))
        if undeclared or missing:
            raise TypeError(
                f"{type(self).__name__} returns outputs its resource does not declare ({undeclared}) or "
                f"misses ones it declares ({missing}): declare each once as a `pulumi.Output` attribute"
            )
        return {**carried, **computed}

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        model, values, failures = validate_inputs(self.args_model, news, self.ignored_keys())
        if model is not None:
            failures += self.transition_failures(olds, model)
        if not failures:
            failures = self.known_failures(values)
        if failures:
            return CheckResult(values, failures)
        return CheckResult({**values, **self.computed(values)}, [])

    def transition_failures(self, olds: Mapping[str, Any], new: InputModel) -> list[CheckFailure]:
        """Failures that depend on the previous inputs (e.g. a volume that would shrink)."""
        return []

    def known_failures(self, values: Mapping[str, Any]) -> list[CheckFailure]:
        """Failures found by a lookup once the inputs are valid (e.g. RunPod's catalog)."""
        return []

    def computed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Values check adds to valid inputs (`computed_keys`)."""
        return {}

    def diff_keys(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> set[str]:
        """The keys diff compares: every input of either side."""
        return (set(olds) | set(news)) - self.ignored_keys()

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = {
            k
            for k in self.diff_keys(olds, news)
            if contains_unknown(news.get(k)) or not self.same(k, olds.get(k), news.get(k))
        }
        replaces = sorted(changed & self.replace_keys)
        self.planned(changed, replaces)
        return DiffResult(
            changes=bool(changed),
            replaces=replaces,
            delete_before_replace=self.delete_before_replace if replaces else None,
        )

    def same(self, key: str, old: Any, new: Any) -> bool:
        """Whether an input is unchanged; subclasses relax this for inputs that outputs fill in."""
        return bool(old == new)

    def planned(self, changed: set[str], replaces: list[str]) -> None:
        """Told what diff decided (e.g. to warn about an in-place update); nothing by default."""
