"""A dynamic resource that does nothing: the baseline `scripts/bench` compares our providers against."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, Resource, ResourceProvider


class TrivialProvider(ResourceProvider):
    """Echoes its inputs; no I/O, no waiting."""

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = any(olds.get(k) != v for k, v in news.items() if k != "__provider")
        return DiffResult(changes=changed)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(uuid.uuid4().hex, props)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)


class Trivial(Resource, module="bench", name="Trivial"):
    """`pulumi-python:dynamic/bench:Trivial`."""

    def __init__(
        self, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TrivialProvider(), name, dict(props), opts)
