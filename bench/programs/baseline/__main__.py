"""Bench program: one component with `bench:resources` trivial dynamic resources (the overhead baseline)."""

from __future__ import annotations

import pulumi

from bench.trivial import Trivial

count = int(pulumi.Config("bench").get("resources") or 7)


class Baseline(pulumi.ComponentResource):
    def __init__(self, name: str) -> None:
        super().__init__("bench:index:Baseline", name, None, None)
        child = pulumi.ResourceOptions(parent=self)
        self.items = [Trivial(f"{name}-{i}", {"name": f"{name}-{i}", "size": i}, child) for i in range(count)]
        self.register_outputs({})


baseline = Baseline(pulumi.get_stack())
pulumi.export("ids", [t.id for t in baseline.items])
