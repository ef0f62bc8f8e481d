"""Drive a shipped stack with the real Pulumi CLI against a local RunPod and a moto S3 server."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.local import LocalRunPod
from harness.pulumi_cli import REPO, Pulumi
from ops.workspace import prepare

# moto's documented test credentials, and visible placeholders for the other secrets.
DEMO_SECRET_VALUES = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@dataclass
class StackRun:
    """One shipped stack in a throwaway workspace, wired to a local RunPod and moto."""

    stack: str
    cli: Pulumi
    runpod: LocalRunPod
    out_dir: Path

    def policy_args(self) -> list[str]:
        return [
            "--policy-pack",
            str(REPO / "policy"),
            "--policy-pack-config",
            str(REPO / f"policy/config/{self.stack}.json"),
        ]

    def up(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cli.run("up", "--yes", "--stack", self.stack, *self.policy_args(), *extra, check=check)

    def preview(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cli.run("preview", "--stack", self.stack, *self.policy_args(), *extra, check=check)

    def refresh(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cli.run("refresh", "--yes", "--stack", self.stack, *extra, check=check)

    def destroy(self) -> subprocess.CompletedProcess[str]:
        return self.cli.run("destroy", "--yes", "--stack", self.stack)

    def outputs(self) -> dict[str, Any]:
        out = self.cli.run("stack", "output", "--json", "--show-secrets", "--stack", self.stack).stdout
        return dict(json.loads(out))

    def config(self) -> dict[str, Any]:
        stack_file = self.cli.project / "stacks" / f"Pulumi.{self.stack}.yaml"
        return dict((yaml.safe_load(stack_file.read_text()) or {}).get("config") or {})


def open_stack(stack: str, tmp: Path, runpod: LocalRunPod, s3_endpoint: str, **extra_env: str) -> StackRun:
    """Prepare the workspace, init the stack, set demo secrets and give the account the declared limit."""
    workspace = prepare(stack, root=tmp / "ws")
    out_dir = tmp / "out"
    env = runpod.env() | {
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "TRAINSTACK_OUT_DIR": str(out_dir),
        "TRAINSTACK_POLL_INTERVAL_S": "0.2",
    }
    run = StackRun(
        stack, Pulumi(project=workspace, state=tmp / "state", extra_env=env | extra_env), runpod, out_dir
    )
    run.cli.stack_init(stack)
    config = run.config()
    if config.get("trainstack:protect"):
        # Tests take their stacks down; tests/e2e/test_protect.py checks that protect holds.
        run.cli.run("config", "set", "--stack", stack, "trainstack:protect", "false")
    training = config.get("trainstack:training") or {}
    for name in training.get("secrets") or []:
        value = DEMO_SECRET_VALUES.get(name, f"local-demo-{name.lower()}")
        run.cli.run("config", "set", "--secret", "--stack", stack, f"trainstack:secrets.{name}", value)
    limit = float(config.get("trainstack:runpod_spend_limit_per_hour") or 80)
    runpod.admin.limits(spendLimit=limit)
    return run
