"""Shared fixtures: the three stacks' config as committed, and node lists like the providers report."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.render import Node
from stackconfig import files
from stackconfig.config import StackConfig

REPO = Path(__file__).resolve().parents[2]
STACKS = ("dev", "search", "prod")


def stack_config(stack: str) -> StackConfig:
    return files.load(stack)


def fake_nodes(config: StackConfig) -> list[Node]:
    """Cluster nodes on a 10.65.0.0/16 fabric, pool pods on 10.0.0.0/8 private IPs."""
    base = "10.65.0" if config.cluster.topology == "cluster" else "10.1.2"
    return [
        Node(rank=i, ip=f"{base}.{10 + i}", pod_id=f"pod{i:03d}", ssh_host="203.0.113.7", ssh_port=40000 + i)
        for i in range(config.cluster.nodes)
    ]


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)
