"""A dynamic resource whose check writes whether the preloaded probe module was already imported."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, ResourceProvider


class ProbeProvider(ResourceProvider):
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        loaded = "tests.toolchain.preload_probe" in sys.modules
        with Path(os.environ["PRELOAD_PROBE_FILE"]).open("a") as out:
            out.write(f"check {os.getpid()} {loaded}\n")
        return CheckResult(news, [])

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="probe", outs=dict(props))


class Probe(pulumi.dynamic.Resource, module="toolcheck", name="Probe"):
    def __init__(self, name: str) -> None:
        super().__init__(ProbeProvider(), name, {})
