"""A trivial dynamic resource with an explicit type token, for toolchain tests."""

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult


class ThingProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"thing-{props['value']}", outs=dict(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = olds.get("value") != news.get("value")
        return DiffResult(changes=changed, replaces=["value"] if changed else [])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=dict(news))


class Thing(pulumi.dynamic.Resource, module="toolcheck", name="Thing"):
    value: pulumi.Output[str]

    def __init__(self, name: str, value: str) -> None:
        super().__init__(ThingProvider(), name, {"value": value})
