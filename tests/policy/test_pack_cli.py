"""Each policy blocks a deliberately bad stack through the real CLI: `pulumi preview --policy-pack`.

Issue #6, Done-when (integration): for each of the 13 policies a bad stack config fails preview with a
mandatory violation from that policy whose message names the resource and the figure, and nothing is
created. The program (tests/policy/program) declares trainstack's REAL provider resources from one stack
config key, so each case below is only a list of resources; their providers' check() computes the costs
the budget policies read, pricing GPUs from the local RunPod's catalog. One module, one workspace, one
stack, reused by every case, keeps the file well under two minutes.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from harness.pulumi_cli import REPO, Pulumi

pytestmark = pytest.mark.e2e

PROGRAM = REPO / "tests/policy/program"
STACK = "check"
MUTATING = ("POST ", "PATCH ", "PUT ", "DELETE ")
H100 = "NVIDIA H100 80GB HBM3"  # $3.99/GPU-hour Secure Cloud in the local RunPod's catalog
WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"  # 40-hex, the shape of a W&B API key

# The pack config every case uses (a case may override keys): dev-like caps.
PACK_CONFIG: dict[str, dict[str, Any]] = {
    "spot-share-limit": {"max_spot_share": 0.5},
    "multi-node-on-demand": {"nodes_env_key": "NUM_NODES"},
    "spot-checkpointing": {"max_checkpoint_interval_s": 900},
    "hourly-burn-limit": {"max_hourly_usd": 40},
    "run-cost-limit": {"max_run_usd": 250, "default_run_hours": 8},
    "storage-cost-limit": {"max_storage_monthly_usd": 50},
    "runpod-spend-limit": {"runpod_spend_limit_per_hour": 80},
    "no-plaintext-secrets": {},
    "checkpoint-bucket-hardening": {"require_kms": False},
    "volume-same-data-center": {"require_pinned": True},
    "allowed-gpu-types": {"allowed_gpu_types": [H100, "NVIDIA H100 NVL", "NVIDIA H100 PCIe"]},
    "no-multi-node-over-global-networking": {"nodes_env_key": "NUM_NODES", "job_env_key": "TRAINING_JOB"},
    "min-cuda-version": {"lowest_min_cuda_version": "12.0"},
}


def pod(name: str, **over: Any) -> dict[str, Any]:
    """A compliant on-demand pod: 1 x H100 ($3.99/h), 50 GB disk ($5/month), CUDA 12.4, a 2 h run."""
    props: dict[str, Any] = {
        "name": name,
        "image": "trainstack/train:1",
        "gpu_type_id": H100,
        "gpu_count": 1,
        "cloud": "SECURE",
        "data_center_ids": ["US-TX-3"],
        "capacity": "on_demand",
        "container_disk_gb": 50,
        "min_cuda_version": "12.4",
        "env": {"HF_TOKEN": "{{ RUNPOD_SECRET_HF_TOKEN }}"},
        "training": {"max_run_hours": 2},
    }
    return {"kind": "Pod", "name": name, "props": props | over}


def spot(name: str, interval_s: int = 600, **over: Any) -> dict[str, Any]:
    """A spot pod that checkpoints to a bucket every `interval_s` (bid $2/GPU-hour)."""
    training = {
        "checkpoint_bucket": "policycheck-ckpt",
        "checkpoint_interval_s": interval_s,
        "max_run_hours": 2,
    }
    return pod(name, capacity="spot", bid_per_gpu=2.0, training=training, **over)


def volume(name: str, size_gb: int = 100, dc: str = "US-TX-3") -> dict[str, Any]:
    props = {"name": name, "size_gb": size_gb, "data_center_id": dc, "volume_type": "STANDARD"}
    return {"kind": "NetworkVolume", "name": name, "props": props}


def bucket(name: str, **over: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "bucket_name": "policycheck-ckpt",
        "versioning": True,
        "encryption": True,
        "block_public_access": True,
        "tls_only": True,
        "lifecycle": {"noncurrent_expire_days": 30, "abort_multipart_days": 7},
    }
    return {"kind": "CheckpointBucket", "name": name, "props": props | over}


def node(name: str, **over: Any) -> dict[str, Any]:
    """One node of the two-node job 'main'."""
    return pod(name, env={"NUM_NODES": "2", "TRAINING_JOB": "main"}, **over)


@dataclass
class Case:
    policy: str
    resources: list[dict[str, Any]]
    expect: list[str]  # the resource and the figure, as the message must name them
    pack: dict[str, dict[str, Any]] = field(default_factory=dict)  # overrides of PACK_CONFIG


CASES = [
    # 2 of 3 GPUs on spot (67%) against a 50% maximum.
    Case(
        "spot-share-limit",
        [spot("sweep", gpu_count=2), pod("anchor")],
        ["sweep", "2 of 3 GPUs", "67%", "50%"],
    ),
    # A node of a 2-node job on spot. The other half of this policy (an Instant Cluster asking for spot)
    # cannot reach the pack: ClusterSpec has no `capacity`/`bid_per_gpu`, so the cluster provider's own
    # check() refuses them first (unknown field). The 2-GPU on-demand anchor keeps the spot share at 1/3.
    Case(
        "multi-node-on-demand",
        [spot("node-0", env={"NUM_NODES": "2"}), pod("anchor", gpu_count=2)],
        ["'node-0'", "NUM_NODES=2", "'spot'"],
    ),
    # Spot checkpoints every hour against a 900 s maximum (share 1 of 2 GPUs = 50%, allowed).
    Case(
        "spot-checkpointing", [spot("sweep", interval_s=3600), pod("anchor")], ["'sweep'", "3600 s", "900 s"]
    ),
    # 2 x 6 x $3.99 + 2 x $5/730 disk = $47.89/h against $40/h (a 1 h run: $47.89, under the run cap).
    Case(
        "hourly-burn-limit",
        [pod(n, gpu_count=6, training={"max_run_hours": 1}) for n in ("big-a", "big-b")],
        ["big-a: $23.95/h", "big-b: $23.95/h", "$47.89/h", "$40/h"],
    ),
    # ($3.99 + $5/730) x 100 h = $399.685, shown as $399.68, against $250.
    Case(
        "run-cost-limit",
        [pod("long", training={"max_run_hours": 100})],
        ["long: $4/h x 100 h", "$399.68", "$250"],
    ),
    # A 1000 GB volume ($70/month) plus the pod's 50 GB disk ($5) = $75/month against $50.
    Case(
        "storage-cost-limit",
        [volume("data", size_gb=1000), pod("trainer", volume_id="${data.id}")],
        ["data: $70/month", "trainer: $5/month", "$75/month", "$50/month"],
    ),
    # 3 x 8 x $3.99 + 3 x $5/730 = $95.78/h against RunPod's $80/h account limit (own cap raised to $200).
    Case(
        "runpod-spend-limit",
        [pod(f"node-{i}", gpu_count=8, training={"max_run_hours": 1}) for i in range(3)],
        ["node-0: $31.93/h", "$95.78/h", "$80/h"],
        pack={"hourly-burn-limit": {"max_hourly_usd": 200}},
    ),
    # A W&B key in plain env: the message names the env var, never the value (asserted below).
    Case(
        "no-plaintext-secrets",
        [pod("trainer", env={"WANDB_API_KEY": WANDB_KEY})],
        ["pod 'trainer'", "WANDB_API_KEY"],
    ),
    Case("checkpoint-bucket-hardening", [bucket("ckpt", versioning=False)], ["bucket 'ckpt'", "versioning"]),
    # The volume is in US-TX-3, the pod asks for EU-RO-1; at preview the volume id is unknown, so the
    # policy finds the volume through the engine's property dependencies of volume_id.
    Case(
        "volume-same-data-center",
        [volume("data"), pod("trainer", data_center_ids=["EU-RO-1"], volume_id="${data.id}")],
        ["'trainer'", "'data'", "US-TX-3", "EU-RO-1"],
    ),
    Case("allowed-gpu-types", [pod("trainer", gpu_type_id="NVIDIA H200")], ["'trainer'", "NVIDIA H200"]),
    Case(
        "no-multi-node-over-global-networking",
        [node("node-0", global_networking=True), node("node-1", global_networking=True)],
        ["node-0", "node-1", "job 'main'"],
    ),
    Case("min-cuda-version", [pod("trainer", min_cuda_version="11.8")], ["'trainer'", "11.8", "12.0"]),
]

GOOD = [
    volume("data"),
    {
        "kind": "Secret",
        "name": "hf-token",
        "props": {"name": "HF_TOKEN", "value": "local-demo-hf-token", "description": "Hugging Face"},
    },
    bucket("ckpt"),
    pod("trainer", volume_id="${data.id}"),
    spot("sweep"),
]


@dataclass
class Workspace:
    cli: Pulumi
    runpod: LocalRunPod
    tmp: Path

    def preview(self, resources: list[dict[str, Any]], pack: dict[str, dict[str, Any]]) -> tuple[int, str]:
        """Preview `resources` under the pack (PACK_CONFIG with `pack`'s overrides): exit status, output."""
        stack_file = self.cli.project / f"Pulumi.{STACK}.yaml"
        doc = yaml.safe_load(stack_file.read_text()) or {}
        doc["config"] = {"policycheck:resources": resources}
        stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        config_file = self.tmp / "pack-config.json"
        config_file.write_text(json.dumps({k: v | pack.get(k, {}) for k, v in PACK_CONFIG.items()}))
        args = ["--policy-pack", str(REPO / "policy"), "--policy-pack-config", str(config_file)]
        result = self.cli.run("preview", "--stack", STACK, *args, check=False)
        return result.returncode, result.stdout + result.stderr

    def mutations(self) -> dict[str, Any]:
        endpoints: dict[str, Any] = self.runpod.admin.counters()["endpoints"]
        return {
            e: c for e, c in endpoints.items() if e.startswith(MUTATING) and not e.startswith("POST /graphql")
        }

    def provider_resources(self) -> list[str]:
        return [r["urn"] for r in self.cli.resources() if r["type"].startswith("pulumi-python:dynamic/")]


@pytest.fixture(scope="module")
def runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    # GraphQL on: the spot policies judge spot pods, which only GraphQL rents (podRentInterruptable); once it
    # answers 410 a spot pod is refused by check() before any policy runs (tests/providers/runpod/
    # test_graphql_retired.py), and the policies still guard every stack made while GraphQL answers.
    server = start_local_runpod(tmp_path_factory.mktemp("policy-runpod"), *FAST_ARGS, "--graphql", "on")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, runpod: LocalRunPod, moto_s3: str) -> Workspace:
    tmp = tmp_path_factory.mktemp("policy-cli")
    project = tmp / "program"
    shutil.copytree(PROGRAM, project, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
    (project / "Pulumi.yaml").write_text(
        (PROGRAM / "Pulumi.yaml").read_text().replace("../../../.venv", str(REPO / ".venv"))
    )
    env = runpod.env() | {
        "PYTHONPATH": str(REPO),  # the program and the dynamic-provider host import providers/
        "AWS_ENDPOINT_URL_S3": moto_s3,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "TRAINSTACK_POLL_INTERVAL_S": "0.2",
    }
    cli = Pulumi(project=project, state=tmp / "state", extra_env=env)
    cli.stack_init(STACK)
    return Workspace(cli, runpod, tmp)


_VIOLATION = re.compile(r"\[(mandatory|advisory)\]\s+(\S+)")


def violations(output: str) -> dict[str, str]:
    """Policy name -> its violation text (whitespace collapsed), from the CLI's Policies section."""
    found: dict[str, str] = {}
    marks = list(_VIOLATION.finditer(output))
    for i, m in enumerate(marks):
        assert m.group(1) == "mandatory", output
        end = marks[i + 1].start() if i + 1 < len(marks) else len(output)
        diagnostics = output.find("Diagnostics:", m.end())
        if diagnostics != -1:
            end = min(end, diagnostics)
        found[m.group(2)] = found.get(m.group(2), "") + " ".join(output[m.end() : end].split())
    return found


def test_every_policy_has_a_case() -> None:
    assert sorted(c.policy for c in CASES) == sorted(PACK_CONFIG)


def test_good_stack_passes(ws: Workspace) -> None:
    """A volume, a secret, a hardened bucket, an on-demand pod on the volume and a checkpointing spot pod."""
    returncode, output = ws.preview(GOOD, {})
    assert returncode == 0, output
    assert violations(output) == {}, output
    assert ws.provider_resources() == []
    assert ws.mutations() == {}
    # The providers' check() did ask the local RunPod (the live GPU catalog), so the counters are live.
    assert ws.runpod.admin.counters()["endpoints"], "the local RunPod saw no request at all"


@pytest.mark.parametrize("case", CASES, ids=[c.policy for c in CASES])
def test_bad_stack_fails_with_a_mandatory_violation(ws: Workspace, case: Case) -> None:
    returncode, output = ws.preview(case.resources, case.pack)
    assert returncode != 0, output
    assert "Traceback" not in output, output
    found = violations(output)
    assert list(found) == [case.policy], output  # that policy, and only that one
    message = found[case.policy]
    for part in case.expect:
        assert part in message, f"{part!r} not in: {message}"
    assert WANDB_KEY not in output
    assert ws.provider_resources() == []  # preview never creates; assert it anyway
    assert ws.mutations() == {}  # RunPod saw lookups only (catalog GET, GraphQL)
