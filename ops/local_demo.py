"""Prepare a local-RunPod workspace: demo secret values and the one account spend limit of all local stacks.

Run by `scripts/up` against the local RunPod only: `python -m ops.local_demo STACK WORKSPACE`. The secret
values are placeholders that exist only in `.state/local/` (moto accepts any AWS key; the local RunPod stores
secrets without reading them). The local RunPod is one account for all stacks: its spend limit is the highest
any `stacks/Pulumi.<stack>.yaml` declares (what the team obtained from RunPod); see ops/local_account.py.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from common.stack import Stack
from ops.local_account import account_limit, declared_limits
from stackconfig import files

# moto's documented test credentials; anything else for the other secrets is a visible placeholder.
_DEMO_VALUES = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def set_demo_secrets(workspace: Path, stack: str, config: dict[str, Any]) -> list[str]:
    training = config.get("trainstack:training") or {}
    names = list(training.get("secrets") or []) if isinstance(training, dict) else []
    for name in names:
        value = _DEMO_VALUES.get(name, f"local-demo-{name.lower()}")
        Stack(stack, workspace).set_config(f"trainstack:secrets.{name}", secret=True, stdin=value)
    return names


def give_account_spend_limit() -> float:
    """The local RunPod is one account for every stack: the highest limit any stack declares
    (ops/local_account.py; `scripts/up` explains when the stacks still running leave too little)."""
    limit = account_limit(declared_limits())
    response = httpx.patch(
        f"{os.environ['RUNPOD_API_URL']}/_admin/limits", json={"spendLimit": limit}, timeout=10
    )
    response.raise_for_status()
    return limit


def point_nodes_at_moto(workspace: Path, stack: str) -> str | None:
    """With emulated hosts the nodes really run: give their start scripts the local S3 endpoint (moto on
    the hosts' bridge), else they would sync checkpoints to AWS itself. Control-plane only: nothing to do."""
    health = httpx.get(f"{os.environ['RUNPOD_API_URL']}/_admin/health", timeout=10).json()
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3")
    if not (health.get("hosts") or {}).get("enabled") or not endpoint:
        return None
    Stack(stack, workspace).set_config("trainstack:s3EndpointUrl", endpoint)
    return endpoint


# The demo's aggregator rounds every 15 s instead of every 5 minutes, so `scripts/watch` shows steps moving
# within a minute of `scripts/up` (a demo run lasts minutes). Local workspace only, like the S3 endpoint.
DEMO_ALERT_INTERVAL_MIN = "0.25"


def quicken_alert_rounds(workspace: Path, stack: str) -> None:
    Stack(stack, workspace).set_config(
        "trainstack:alerts.interval_min", DEMO_ALERT_INTERVAL_MIN, path=True, kind="float"
    )


# The NVMe latency alert's floor for the demo's nodes: 100 ms at p99, not a real node's 100 us. Their disk is
# this machine's (a laptop's measured 5,919-13,594 us at p99: issue #68), so the real floor fired on every
# `scripts/watch` screen; like the all-reduce and free-disk floors of `demo_node_env`
# (localcloud/servers.py), it is relaxed here, in the local workspace only, and `scripts/up` says so.
DEMO_NVME_P99_MAX_US = "100000"


def relax_disk_floor(workspace: Path, stack: str) -> None:
    Stack(stack, workspace).set_config(
        "trainstack:alerts.nvme_p99_max_us", DEMO_NVME_P99_MAX_US, path=True, kind="float"
    )


@dataclass(frozen=True)
class DemoSettings:
    """What the local demo set in a stack's workspace: placeholder secrets, the account's spend limit, and
    the S3 endpoint its emulated hosts reach (None: control-plane only)."""

    secrets: list[str]
    limit: float
    endpoint: str | None

    def lines(self) -> list[str]:
        if self.endpoint:
            hosts = (
                f"nodes are emulated hosts (CPU, gloo: train/train.py, a tiny MLP), S3 at {self.endpoint}; "
                "the aggregator rounds every 15 s; their disk is this machine's, not an NVMe, so the "
                f"nvme_latency_high floor is {float(DEMO_NVME_P99_MAX_US) / 1000:g} ms at p99 (a real "
                "node's: trainstack:alerts.nvme_p99_max_us)"
            )
        else:
            # What that skips (delivery, so nothing trains) is the program's one warning in the preview.
            hosts = "control-plane only (no emulated hosts: not root, or no sshd)"
        secrets = ", ".join(self.secrets) or "no secrets"
        return [
            f"local demo: {hosts}",
            f"local demo: placeholder values for {secrets}; account spend limit ${self.limit:g}/h",
        ]


def apply(stack: str, workspace: Path) -> DemoSettings:
    """The demo's settings written into the local workspace of `stack` (its config there, the account)."""
    config = files.read_config(stack, workspace / "stacks")
    names = set_demo_secrets(workspace, stack, config)
    limit = give_account_spend_limit()
    endpoint = point_nodes_at_moto(workspace, stack)
    if endpoint:
        quicken_alert_rounds(workspace, stack)
        relax_disk_floor(workspace, stack)
    return DemoSettings(names, limit, endpoint)


def main(argv: list[str]) -> int:
    for line in apply(argv[0], Path(argv[1])).lines():
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
