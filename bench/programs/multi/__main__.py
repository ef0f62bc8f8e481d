"""Bench program: `bench:clusters` copies of the stack's H100Cluster in one stack (scale benchmark only)."""

from __future__ import annotations

import pulumi

from components.cluster import H100Cluster, H100ClusterArgs, read_secret_values, read_stack_config

config = read_stack_config()
secrets = read_secret_values(config)
count = int(pulumi.Config("bench").get("clusters") or 1)
stack = pulumi.get_stack()
clusters = [H100Cluster(f"{stack}-{i}", H100ClusterArgs(config, secrets)) for i in range(count)]
pulumi.export("nodes", pulumi.Output.all(*[c.nodes for c in clusters]).apply(lambda ns: sum(map(len, ns))))
