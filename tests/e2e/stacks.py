"""Drive a shipped stack with the real Pulumi CLI against a local RunPod and a moto S3 server."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import kms
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
    # The policy pack in every up and preview: only where a test reads what the pack says (issue #47: a
    # pack process per pass, ~0.45 CPU-s). Elsewhere the engine runs the program and providers alone; the
    # rules are tested as functions (tests/policy) and through the real CLI in tests/policy/test_pack_cli.py,
    # test_forecast_policies, test_bad_input, test_capacity_fallback, test_read_only_preview,
    # test_secrets_and_state, test_lifecycle, scripts/up's tests and the supervisor's own ups.
    policy: bool = False

    def policy_args(self) -> list[str]:
        return [
            "--policy-pack",
            str(REPO / "policy"),
            "--policy-pack-config",
            str(REPO / f"policy/config/{self.stack}.json"),
        ]

    def up(
        self, *extra: str, check: bool = True, preview: bool | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`pulumi up --yes`, with the stack's policy pack when `policy` is set. Without the preview pass
        unless `preview` (issue #47: it runs the program, the dynamic provider and the policy pack once
        more, ~2.5 CPU-s an up): the update pass runs the same program and policies, so an up that must
        succeed shows the same. An up expected to fail (`check=False`) keeps it by default: a refusal
        there comes before anything is created. `preview=True` where a test reads what only the preview
        says (its warnings)."""
        keep = (not check) if preview is None else preview
        skip = [] if keep or "--skip-preview" in extra else ["--skip-preview"]
        argv = ["up", "--yes", *skip, "--stack", self.stack, *self._pack(), *extra]
        return self.cli.run(*argv, check=check)

    def preview(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cli.run("preview", "--stack", self.stack, *self._pack(), *extra, check=check)

    def _pack(self) -> list[str]:
        return self.policy_args() if self.policy else []

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


def open_stack(
    stack: str,
    tmp: Path,
    runpod: LocalRunPod,
    s3_endpoint: str,
    *,
    policy: bool = False,
    passphrase: bool = False,
    **extra_env: str,
) -> StackRun:
    """Prepare the workspace, init the stack, set demo secrets and give the account the declared limit.
    `policy`: its ups and previews run the stack's policy pack (StackRun.policy). Its secrets are encrypted
    with a KMS key in the moto at `s3_endpoint` (harness/kms.py says why), or with the passphrase, as
    scripts/up's demo stacks are, where `passphrase` is set."""
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
        stack,
        Pulumi(project=workspace, state=tmp / "state", extra_env=env | extra_env),
        runpod,
        out_dir,
        policy,
    )
    run.cli.stack_init(stack, None if passphrase else kms.secrets_provider(s3_endpoint))
    config = run.config()
    # One `config set-all` for every value (issue #47: a CLI process each was ~0.4 CPU-s).
    values: list[str] = []
    if config.get("trainstack:protect"):
        # Tests take their stacks down; tests/e2e/test_protect.py checks that protect holds.
        values += ["--plaintext", "trainstack:protect=false"]
    training = config.get("trainstack:training") or {}
    for name in training.get("secrets") or []:
        value = DEMO_SECRET_VALUES.get(name, f"local-demo-{name.lower()}")
        values += ["--secret", f"trainstack:secrets.{name}={value}"]
    if values:
        run.cli.run("config", "set-all", "--stack", stack, *values)
    limit = float(config.get("trainstack:runpod_spend_limit_per_hour") or 80)
    runpod.admin.limits(spendLimit=limit)
    return run
