"""Stack config (`trainstack:*`) as typed models, its keys and its problems; `stackconfig.loader` parses a
stack's config into them (`load_stack_config`), naming every problem's key path and its fix.

Keys (see stacks/Pulumi.*.yaml for worked examples):

    trainstack:cluster                     object  ClusterConfig   what to rent
    trainstack:bucket                      object  BucketConfig    S3 checkpoint bucket (optional)
    trainstack:training                    object  TrainingConfig  what the nodes run
    trainstack:training.model              object  ModelConfig     what is trained, for the forecast
    trainstack:alerts                      object  AlertsConfig    when the run's watcher alerts (optional)
    trainstack:supervisor                  object  SupervisorConfig  when scripts/supervise releases compute
    trainstack:run                         object  RunConfig       the run's phase and its one cost cap
    trainstack:recovery                    object  RecoveryConfig  when scripts/supervise recovers a run
    trainstack:runpod_spend_limit_per_hour number  the account's RunPod spend limit, USD/h (default 80)
    trainstack:delivery_enabled            bool    copy artifacts to the nodes over SSH and start them
    trainstack:protect                     bool    Pulumi `protect` on the volume, bucket and compute
    trainstack:s3EndpointUrl               string  S3-compatible endpoint (shared with providers/s3)
    trainstack:secrets.<ENV_NAME>          secret  value of a secret in training.secrets; never read here

Every default is written once, on the model fields below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from common.errors import TrainstackError
from facts.gpus import GPUS
from facts.money import DEFAULT_SPEND_LIMIT_PER_HOUR
from facts.s3 import bucket_name_problem
from stackconfig.alerts import AlertsConfig
from stackconfig.credentials import credential_kind, mask
from stackconfig.image_ref import image_reference_problem
from stackconfig.model import ModelConfig
from stackconfig.numbers import Number, in_range  # Number: never a boolean; numeric text is read
from stackconfig.slurm import SlurmConfig
from stackconfig.supervisor import RecoveryConfig, RunConfig, SupervisorConfig

NAMESPACE = "trainstack"
SECRETS_KEY = "secrets"  # values live under trainstack:secrets.<ENV_NAME>; this module never reads them


def secret_config_key(env_name: str) -> str:
    """The Pulumi config key holding a secret's value: `pulumi config set --secret <key> <value>`."""
    return f"{NAMESPACE}:{SECRETS_KEY}.{env_name}"


@dataclass(frozen=True)
class ConfigProblem:
    """One broken rule: where, what, and what to do about it."""

    path: str  # full key path, e.g. "trainstack:cluster.nodes"
    message: str  # what is wrong, ending with the fix after "; "

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(TrainstackError, ValueError):
    """The stack config breaks one or more rules; `problems` lists every one of them."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the stack config:\n{lines}")


class _Model(BaseModel):
    # allow_inf_nan=False: "nan", "inf" and 1e309 are refused everywhere (a NaN floor rendered as `:-nan`
    # made the preflight pass any fabric). Whole-number fields are StrictInt and the others Number:
    # `nodes: true` or `nodes: "8"` is a mistake to report, not a value to coerce.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_DC_RE = re.compile(r"^[A-Z]{2}-[A-Z]{2,4}-\d+$")


class RegistryAuthConfig(_Model):
    """A private registry the pods pull `image` from; the password is the Pulumi secret at
    `trainstack:secrets.REGISTRY_PASSWORD` (never in this model)."""

    name: str = Field(min_length=1)  # how the credential is named on RunPod (prefixed with the stack)
    username: str = Field(min_length=1)


REGISTRY_PASSWORD_KEY = f"{NAMESPACE}:{SECRETS_KEY}.REGISTRY_PASSWORD"


class ClusterConfig(_Model):
    """What to rent from RunPod."""

    gpu_type: str = "H100_SXM"  # key of facts.gpus.GPUS
    topology: Literal["cluster", "pods"] = "pods"  # one Instant Cluster, or independent pods
    nodes: StrictInt = 1  # nodes of the cluster, or pods in the pool
    gpus_per_node: StrictInt = 8
    capacity: Literal["on_demand", "spot", "auto"] = "on_demand"  # auto: spot, falling back to on-demand
    bid_per_gpu: Number | None = None  # USD per GPU-hour offered for spot; required for spot and auto
    cloud: Literal["SECURE", "COMMUNITY"] = "SECURE"
    data_centers: tuple[str, ...] = ()  # RunPod data center ids; empty lets RunPod choose (pods only)
    image: str = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
    container_disk_gb: StrictInt = 50  # lost when a pod stops or is preempted
    volume_gb: StrictInt = 0  # network volume (NVMe-backed), 0 for none
    volume_type: Literal["STANDARD", "HIGH_PERFORMANCE"] = "STANDARD"
    volume_mount_path: str = "/workspace"
    master_port: StrictInt = 29500  # rendezvous port when RunPod does not inject MASTER_PORT
    registry_auth: RegistryAuthConfig | None = None  # pods only: Instant Clusters take no credential
    # Who runs the training: the start scripts, or Slurm on a `type: SLURM` cluster (docs/SLURM.md)
    scheduler: Literal["scripts", "slurm"] = "scripts"
    slurm: SlurmConfig = SlurmConfig()  # the Slurm job's identity (stackconfig/slurm.py)

    @field_validator("gpu_type")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPUS:
            raise ValueError(f"unknown GPU type {v!r}; use one of {', '.join(sorted(GPUS))}")
        return v

    @field_validator("nodes")
    @classmethod
    def _positive_nodes(cls, v: int) -> int:
        # 250: RunPod v2's bound on a cluster's podCount; a pool of pods is held to the same.
        return int(in_range(v, 1, 250, "set the number of nodes (or pods in the pool)"))

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus_per_node(cls, v: int) -> int:
        return int(in_range(v, 1, 16, "RunPod machines hold at most 8 GPUs; e.g. 8"))

    @field_validator("data_centers", mode="before")
    @classmethod
    def _dc_list(cls, v: Any) -> Any:
        if isinstance(v, str) and v.lstrip().startswith("["):
            raise ValueError(
                f"must be a list, got the string {v!r} (`pulumi config set --path` stores text); set "
                "each entry, `--path 'trainstack:cluster.data_centers[0]' US-TX-3`, or write the YAML "
                "list in stacks/Pulumi.<stack>.yaml"
            )
        if isinstance(v, str):
            raise ValueError(
                f"must be a list of data center ids in the order to try, got the string {v!r}; write "
                f"[{v}] for one, or e.g. [US-TX-3, EU-RO-1] to fall back to EU-RO-1"
            )
        return v

    @field_validator("data_centers")
    @classmethod
    def _dc_format(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [dc for dc in v if not _DC_RE.match(dc)]
        if bad:
            raise ValueError(f"{bad} are not RunPod data center ids; write ids like 'US-TX-3' or 'EU-RO-1'")
        twice = sorted({dc for dc in v if v.count(dc) > 1})
        if twice:
            raise ValueError(
                f"{twice} listed more than once; name each data center once, in the order to try"
            )
        return v

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, v: str) -> str:
        problem = image_reference_problem(v)
        if problem:
            raise ValueError(problem)
        last = v.rsplit("/", 1)[-1]
        if not v.strip() or ("@sha256:" not in v and (":" not in last or last.endswith(":latest"))):
            raise ValueError(
                f"image {v!r} is not pinned; name a tag or digest (e.g. 'runpod/pytorch:2.4.0-py3.11-"
                "cuda12.4.1-devel-ubuntu22.04'), never 'latest', so every node runs the same bits"
            )
        return v

    @field_validator("container_disk_gb")
    @classmethod
    def _disk(cls, v: int) -> int:
        if not 20 <= v <= 2000:
            raise ValueError(f"must be 20-2000 GB, got {v}; CUDA images are ~16 GB, so give at least 20")
        return v

    @field_validator("volume_gb")
    @classmethod
    def _volume(cls, v: int) -> int:
        if v != 0 and not 10 <= v <= 4096:
            raise ValueError(f"must be 0 (no volume) or 10-4096 GB (RunPod's bounds), got {v}; pick a size")
        return v

    @field_validator("master_port")
    @classmethod
    def _port(cls, v: int) -> int:
        if not 1024 <= v <= 65534:
            raise ValueError(f"must be 1024-65534, got {v}; the default 29500 is torchrun's own")
        return v


_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_KMS_RE = re.compile(
    r"^(arn:aws:kms:(?P<region>[a-z0-9-]+):\d{12}:(key|alias)/[\w/-]+|alias/[\w/-]+|[0-9a-f-]{36})$"
)


class BucketConfig(_Model):
    """The S3 bucket that holds checkpoints, so a run survives losing every node."""

    name: str
    region: str
    kms_key_id: str | None = None  # SSE-KMS key (ARN, alias or id); None means SSE-S3
    prefix: str = "trainstack"  # keys are <prefix>/<job>/step-<n>.pt, job = <stack> or <stack>-pod-<i>
    # Let a delete (destroy, or a bucket_name change) remove a bucket that still holds checkpoints, with
    # every version. Off: such a delete stops and says so. Takes effect once an `up` has recorded it.
    force_destroy: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        problem = bucket_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _REGION_RE.match(v):
            raise ValueError(f"{v!r} is not an AWS region; write one like 'us-east-1'")
        return v

    @field_validator("kms_key_id")
    @classmethod
    def _kms(cls, v: str | None) -> str | None:
        if v is not None and not _KMS_RE.match(v):
            raise ValueError(f"{v!r} is not a KMS key; give a key ARN, 'alias/<name>' or key id, or omit it")
        return v


# An env var's name: what a secret is named by (stackconfig.loader reads the declared ones with it too).
ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_RESERVED_ENV_PREFIXES = ("RUNPOD_", "NCCL_", "TRAINSTACK_", "TORCH_")
_RESERVED = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "PRIMARY_ADDR", "PRIMARY_PORT", "NODE_RANK", "NODE_ADDR", "NUM_NODES"}
    | {"NUM_TRAINERS", "WORLD_SIZE", "RANK", "LOCAL_RANK", "HOST_NODE_ADDR", "PATH", "HOME"}
)


class TrainingConfig(_Model):
    """What every node runs, and the guards around it."""

    command: tuple[str, ...] = ("train/train.py",)  # torchrun's script (or -m module) and its arguments
    workdir: str = "/workspace/trainstack"  # where the repo's train/ lands on the node
    max_run_hours: Number = 4.0  # the watchdog checkpoints and stops the run after this long
    checkpoint_interval_min: StrictInt = 10  # checkpoints are synced to the bucket this often
    # Preflight all-reduce bus bandwidth floor in GB/s (gigabytes, as nccl-tests reports it); 0 only reports.
    nccl_min_busbw_gb_per_s: Number = 0.0
    min_free_disk_gb: StrictInt = 20  # preflight: free space needed where checkpoints are written
    max_restarts: StrictInt = 3  # torchrun --max-restarts
    device: Literal["cuda", "cpu"] = "cuda"  # cpu: test clusters without GPUs (gloo, no GPU health gate)
    secrets: tuple[str, ...] = ()  # env var names the node gets over SSH (delivery:SecretsFile)
    model: ModelConfig | None = None  # what is trained, for the forecast (stackconfig/model.py)
    # Node health (train/node/, docs/NODE-HEALTH.md).
    burn_in_min: Number = 0.0  # GEMM + all-reduce stress before training; 0 = off (set it for new hardware)
    straggler_tolerance_pct: Number = 10.0  # a GPU this far under its node's median GEMM TFLOPS fails
    burn_in_clock_drop_pct: Number = 20.0  # burn-in: an SM clock sample this far under its GPU's median drops
    # burn-in: bus bandwidth's 5th percentile this far under its median fails. A healthy 2 x H200 NVLink
    # machine read 153.5 against a median of 208.7 GB/s (-26%) in 170 s (docs/GPU-VALIDATION.md), so 25 was a
    # false alarm; a link that falls back from NVLink to PCIe loses far more than half.
    burn_in_busbw_drop_pct: Number = 50.0
    metrics_port: StrictInt = 9400  # the metrics agent's port (loopback + private fabric only); 0 = no agent
    metrics_interval_s: Number = 5.0  # the agent samples GPUs, storage latency and progress this often

    @field_validator("command")
    @classmethod
    def _command(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or not v[0].strip():
            raise ValueError("is empty; give torchrun's script and its arguments, e.g. ['train/train.py']")
        return v

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, v: str) -> str:
        parts = v.split("/")
        if not v.startswith("/") or ".." in parts or any(c.isspace() or c == "\0" for c in v):
            raise ValueError(
                f"must be an absolute path on the node without '..' or spaces, got {v!r}; the start script "
                "cds there and RunPod starts it from no fixed directory, e.g. /workspace/trainstack"
            )
        return v

    @field_validator("max_run_hours")
    @classmethod
    def _hours(cls, v: float) -> float:
        if not 0 < v <= 168:
            raise ValueError(
                f"must be more than 0 and at most 168 (a week), got {v}; RunPod's own auto-stop timers "
                "never fire, so this watchdog is the only bound on a run's bill"
            )
        return v

    @field_validator("max_restarts")
    @classmethod
    def _restarts(cls, v: int) -> int:
        if not 0 <= v <= 10:
            raise ValueError(f"must be 0-10, got {v}; a job that fails 10 times needs a person, not a retry")
        return v

    @field_validator("min_free_disk_gb", "nccl_min_busbw_gb_per_s")
    @classmethod
    def _non_negative(cls, v: float) -> float:
        # 100,000: more GB than any node's disk, more GB/s than any fabric (NVLink 4 is 900 GB/s).
        return in_range(v, 0, 100_000, "use 0 to skip the check")

    @field_validator("burn_in_min")
    @classmethod
    def _burn_in(cls, v: float) -> float:
        if not 0 <= v <= 240:
            raise ValueError(
                f"must be 0 (off) to 240 minutes, got {v}; operators run 10-15 minutes on new hardware"
            )
        return v

    @field_validator("straggler_tolerance_pct", "burn_in_clock_drop_pct", "burn_in_busbw_drop_pct")
    @classmethod
    def _pct(cls, v: float) -> float:
        if not 1 <= v <= 90:
            raise ValueError(f"must be a percentage from 1 to 90, got {v}; the default is a good start")
        return v

    @field_validator("metrics_port")
    @classmethod
    def _metrics_port(cls, v: int) -> int:
        if v != 0 and not 1024 <= v <= 65535:
            raise ValueError(f"must be 0 (no agent) or 1024-65535, got {v}; the default is 9400")
        return v

    @field_validator("metrics_interval_s")
    @classmethod
    def _interval(cls, v: float) -> float:
        if not 1 <= v <= 300:
            raise ValueError(f"must be 1-300 seconds, got {v}; 5 keeps the agent under 1% of a core")
        return v

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in v if not ENV_RE.match(s) or s.startswith(_RESERVED_ENV_PREFIXES) or s in _RESERVED]
        if bad:
            # What lands here by mistake is often the token itself rather than its name: show env-name-like
            # entries, mask the rest.
            shown = ", ".join(repr(s) if ENV_RE.match(s) and not credential_kind(s) else mask(s) for s in bad)
            raise ValueError(
                f"{shown} cannot be secret names; use UPPER_SNAKE env var names that are not set by RunPod, "
                "torchrun, NCCL or trainstack (e.g. HF_TOKEN)"
            )
        if len(set(v)) != len(v):
            raise ValueError("lists a name twice; list each secret once")
        return v


class StackConfig(_Model):
    """Everything the stack needs, parsed and checked."""

    cluster: ClusterConfig = ClusterConfig()
    bucket: BucketConfig | None = None
    training: TrainingConfig = TrainingConfig()
    alerts: AlertsConfig = AlertsConfig()
    supervisor: SupervisorConfig = SupervisorConfig()  # stackconfig/supervisor.py
    run: RunConfig = RunConfig()
    recovery: RecoveryConfig = RecoveryConfig()  # stackconfig/supervisor.py
    runpod_spend_limit_per_hour: Number = DEFAULT_SPEND_LIMIT_PER_HOUR  # raised only by RunPod on request
    # Copy the artifacts to every node over SSH and start its script: on for every shipped stack, so an `up`
    # trains; false only renders them (out/<stack>/), for a stack that starts its nodes some other way.
    delivery_enabled: bool = True
    # Pulumi's `protect` on what is stateful or expensive (network volume, checkpoint bucket, cluster or
    # pods): `pulumi destroy` and any replace of them stop with an error until it is set false and an `up`
    # has recorded that. On in stacks/Pulumi.prod.yaml.
    protect: bool = False
    s3_endpoint_url: str | None = None  # config key trainstack:s3EndpointUrl, shared with providers/s3

    @field_validator("runpod_spend_limit_per_hour")
    @classmethod
    def _limit(cls, v: float) -> float:
        return in_range(v, 0, 1_000_000, "RunPod's default account limit is 80", low_open=True)
