"""Pure rendering of the node artifacts (hostfile, hosts, start scripts) from plain records and the config."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import contract
from common.stackname import stack_name_problem
from components.alerts import stack_alert_rules
from components.slurm import render_slurm_files, slurm_job_name
from facts.gpus import GPUS
from forecast.stack import stack_forecast
from stackconfig.alerts import prometheus_rules
from stackconfig.config import StackConfig
from train.monitor.rules import AlertRules

# The static part of every start script; the rendered header above it sets the variables it reads.
_BODY = (Path(__file__).parent / "templates" / "start-node.body.bash").read_text(encoding="utf-8")
_ADDR_RE = re.compile(r"^[A-Za-z0-9.:-]+$")  # an IP or host name: nothing a shell or hosts file would split
_NO_VOLUME_CHECKPOINT_ROOT = "/root/trainstack-checkpoints"  # container disk: lost when the pod stops
STOP_GRACE_S = 300  # after max_run_hours: time the job gets to checkpoint and stop before SIGTERM
# on SIGTERM: a spot pod is killed 5 s after the notice (RunPod's spot docs, docs.runpod.io/pods/pricing
# before 2026-05-06)
TERM_UPLOAD_S = 4


@dataclass(frozen=True)
class Node:
    """One machine as the providers report it."""

    rank: int  # 0 = primary (Instant Cluster rank) or index in the pod pool
    ip: str  # fabric IP (cluster) or private IP (pods)
    pod_id: str  # RunPod pod id
    ssh_host: str  # where `ssh -p <ssh_port> root@<ssh_host>` reaches the node
    ssh_port: int
    boot: int = 0  # the pod's starts after a declared stop (runpod:Pod `boots`): each boot is a new run

    @property
    def ssh_endpoint(self) -> str:
        return f"{self.ssh_host}:{self.ssh_port}"


@dataclass(frozen=True)
class Artifacts:
    """Everything rendered for one stack; file name -> text in `files`."""

    hostfile: str
    hosts: str
    start_scripts: Mapping[str, str] = field(default_factory=dict)  # "start-node-<rank>.sh" -> script
    alerts_json: str = ""  # the aggregator's rules (node 0), train/monitor/rules.py
    alerts_rules: str = ""  # the same thresholds as Prometheus alerting rules, for teams' own Prometheus
    # A pool (topology pods): pod index -> its own (hostfile, hosts), naming itself alone; empty for a cluster
    own_hosts: Mapping[int, tuple[str, str]] = field(default_factory=dict)

    def files(self) -> dict[str, str]:
        alerts = (
            {"alerts.json": self.alerts_json, "alerts.rules.yml": self.alerts_rules}
            if self.alerts_json
            else {}
        )
        return {"hostfile": self.hostfile, "hosts": self.hosts, **self.start_scripts, **alerts}


@dataclass(frozen=True)
class _Job:
    """What one node's torchrun joins: the whole cluster, or its own pod (pods topology)."""

    name: str  # rendezvous id, checkpoint dir and bucket prefix
    node_rank: int
    num_nodes: int
    master_addr: str
    shard_by_node: bool  # cluster: each node reads its own data shard; pods: every trial reads all data
    index: int  # the node's rank in the stack's node list (cluster rank or pool index)
    primary_pod_id: str = ""  # the pod of the job's rank 0
    primary_boot: int = 0  # and its boot (a pod started again after a declared stop)

    @property
    def run_id(self) -> str:
        return run_id(self.name, self.primary_pod_id, self.primary_boot)


def run_id(job_name: str, primary_pod_id: str, boot: int = 0) -> str:
    """One rental of a job's compute: the job and the pod of its rank 0, so the next `up` after a release
    (new pods) starts a new run; a pod stopped and started again (release_mode stop) adds its boot, so that
    boot is a new run too. The run's record is `run/<run id>/state.json` in the bucket."""
    return f"{job_name}.{primary_pod_id}" + (f".b{boot}" if boot else "")


def stack_run_ids(
    stack: str,
    topology: str,
    pod_ids: Sequence[str],
    boots: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
) -> list[str]:
    """The run ids of a stack's jobs, from its nodes' pod ids (and boots, and ranks: a pool's pod index,
    with gaps where a trial ended) in rank order (what scripts/supervise reads)."""
    if not pod_ids:
        return []
    boot = list(boots or [0] * len(pod_ids))
    if topology == "cluster":
        return [run_id(stack, pod_ids[0], boot[0])]
    index = list(ranks) if ranks is not None else list(range(len(pod_ids)))
    return [
        run_id(f"{stack}-pod-{rank}", pod_id, b) for rank, pod_id, b in zip(index, pod_ids, boot, strict=True)
    ]


def job_files(pool: bool, index: int) -> tuple[str, str, str]:
    """(hostfile, hosts, aggregator state) of a job's first node, relative to the workdir: a cluster's one
    job names them once; a pool pod's own carry its index, since the pool's pods may share one network
    volume (the workdir) and each trial's files are its own."""
    if not pool:
        return "hostfile", "hosts", "metrics/aggregator.json"
    return f"hostfile-pod-{index}", f"hosts-pod-{index}", f"metrics/aggregator-pod-{index}.json"


def render_hostfile(nodes: Sequence[Node], gpus_per_node: int, pool: bool = False) -> str:
    """DeepSpeed/MPI hostfile, `<ip> slots=<gpus>` in rank order (`pool`: ranks may have gaps)."""
    return "".join(f"{n.ip} slots={gpus_per_node}\n" for n in _checked(nodes, pool))


def render_hosts(nodes: Sequence[Node], pool: bool = False) -> str:
    """/etc/hosts lines, `<ip> node-<rank>`, so nodes never depend on DNS."""
    return "".join(f"{n.ip} node-{n.rank}\n" for n in _checked(nodes, pool))


def render_artifacts(
    stack: str,
    config: StackConfig,
    nodes: Sequence[Node],
    s3_endpoint_url: str | None = None,
    rules: AlertRules | None = None,
) -> Artifacts:
    """All artifacts for the stack; `s3_endpoint_url` (if any) becomes the nodes' default S3 endpoint.
    `rules`: the component's alert rules (else built here from the config and its forecast)."""
    pool = config.cluster.topology == "pods"
    nodes = _checked(nodes, pool)
    rules = rules if rules is not None else stack_alert_rules(config, stack_forecast(config))
    gpus = config.cluster.gpus_per_node
    return Artifacts(
        hostfile=render_hostfile(nodes, gpus, pool),
        hosts=render_hosts(nodes, pool),
        start_scripts={
            f"start-node-{n.rank}.sh": render_start_script(stack, config, nodes, n.rank, s3_endpoint_url)
            for n in nodes
        }
        | render_slurm_files(stack, config, job_files(pool, 0)[0], STOP_GRACE_S),
        alerts_json=rules.to_json() if config.alerts.enabled else "",
        alerts_rules=prometheus_rules(rules, stack) if config.alerts.enabled else "",
        own_hosts={n.rank: (render_hostfile([n], gpus, True), render_hosts([n], True)) for n in nodes}
        if pool
        else {},
    )


def render_start_script(
    stack: str, config: StackConfig, nodes: Sequence[Node], rank: int, s3_endpoint_url: str | None = None
) -> str:
    """The strict-bash start script of node `rank` (see templates/start-node.body.bash for what it does)."""
    problem = stack_name_problem(stack)
    if problem is not None:
        raise ValueError(problem)
    pool = config.cluster.topology == "pods"
    nodes = _checked(nodes, pool)
    job = _job(stack, config, nodes, rank)
    if pool:  # a pool pod's script names itself alone: another trial's start or end never changes it
        nodes = [n for n in nodes if n.rank == rank]
    header = [
        "#!/usr/bin/env bash",
        f"# start-node-{rank}.sh: trainstack stack '{stack}', node {rank} of "
        f"{config.cluster.nodes if pool else len(nodes)} "
        f"(topology {config.cluster.topology}, job {job.name}).",
        "# Rendered by components/render.py: do not edit, re-render. RunPod's injected cluster variables",
        "# (MASTER_ADDR, NODE_RANK, ...) win over the RENDERED_* values; every TRAINSTACK_* value below",
        "# can be overridden from the environment. No secret value is ever written here.",
        "set -euo pipefail",
        "",
        *_assignments(stack, config, job, nodes, s3_endpoint_url),
        "",
    ]
    return "\n".join(header) + _BODY


def _assignments(
    stack: str, config: StackConfig, job: _Job, nodes: Sequence[Node], s3_endpoint_url: str | None
) -> list[str]:
    c, t = config.cluster, config.training
    root = f"{c.volume_mount_path}/checkpoints" if c.volume_gb else _NO_VOLUME_CHECKPOINT_ROOT
    bucket = config.bucket
    overridable: dict[str, str | int | float] = {
        "TRAINSTACK_STACK": stack,
        "TRAINSTACK_JOB": job.name,
        "TRAINSTACK_DEVICE": t.device,
        "TRAINSTACK_WORKDIR": t.workdir,
        # Where delivery:SecretsFile writes this node's secrets (`<dir>/<pod id>.env`; outside the workdir).
        "TRAINSTACK_SECRETS_DIR": contract.SECRETS_DIR,
        "TRAINSTACK_CHECKPOINT_DIR": f"{root}/{job.name}",
        "TRAINSTACK_CHECKPOINT_BUCKET": bucket.name if bucket else "",
        "TRAINSTACK_CHECKPOINT_PREFIX": f"{bucket.prefix}/{job.name}" if bucket else "",
        "TRAINSTACK_CHECKPOINT_INTERVAL_S": t.checkpoint_interval_min * 60,
        "TRAINSTACK_MAX_RUN_S": math.ceil(t.max_run_hours * 3600),
        "TRAINSTACK_STOP_GRACE_S": STOP_GRACE_S,
        "TRAINSTACK_TERM_UPLOAD_S": TERM_UPLOAD_S,
        "TRAINSTACK_MAX_RESTARTS": t.max_restarts,
        "TRAINSTACK_MIN_FREE_DISK_GB": t.min_free_disk_gb,
        "TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S": f"{t.nccl_min_busbw_gb_per_s:g}",
        "TRAINSTACK_GEMM_FLOOR_TFLOPS": f"{GPUS[c.gpu_type].bf16_gemm_floor_tflops:g}",
        "TRAINSTACK_STRAGGLER_TOLERANCE_PCT": f"{t.straggler_tolerance_pct:g}",
        "TRAINSTACK_BURN_IN_S": math.ceil(t.burn_in_min * 60),
        "TRAINSTACK_BURN_IN_CLOCK_DROP_PCT": f"{t.burn_in_clock_drop_pct:g}",
        "TRAINSTACK_BURN_IN_BUSBW_DROP_PCT": f"{t.burn_in_busbw_drop_pct:g}",
        "TRAINSTACK_METRICS_PORT": t.metrics_port,
        "TRAINSTACK_METRICS_INTERVAL_S": f"{t.metrics_interval_s:g}",
        "TRAINSTACK_SHARD_BY_NODE": int(job.shard_by_node),
        "TRAINSTACK_POD_INDEX": job.index,
        "TRAINSTACK_RUN_ID": job.run_id,
        "TRAINSTACK_HOSTFILE": job_files(c.topology == "pods", job.index)[0],
        "TRAINSTACK_AGGREGATOR_STATE": job_files(c.topology == "pods", job.index)[2],
    }
    lines = [
        "# Identity of this node; RunPod's injected variables take precedence (see section 1 below).",
        f"RENDERED_NODE_RANK={job.node_rank}",
        f"RENDERED_NUM_NODES={job.num_nodes}",
        f"RENDERED_GPUS_PER_NODE={c.gpus_per_node}",
        f"RENDERED_MASTER_ADDR={shlex.quote(job.master_addr)}",
        f"RENDERED_MASTER_PORT={c.master_port}",
        "",
        "# Settings; each may be overridden from the environment.",
    ]
    lines += [f"{k}=${{{k}:-{shlex.quote(str(v))}}}" for k, v in overridable.items()]
    if s3_endpoint_url:
        lines.append(f"AWS_ENDPOINT_URL_S3=${{AWS_ENDPOINT_URL_S3:-{shlex.quote(s3_endpoint_url)}}}")
        lines.append("export AWS_ENDPOINT_URL_S3")
    lines += [
        "",
        "# torchrun's script and arguments, run from TRAINSTACK_WORKDIR.",
        f"TRAIN_COMMAND=({' '.join(shlex.quote(a) for a in t.command)})",
        "# Env vars read from the node's secrets file (delivery:SecretsFile); checked, never printed.",
        f"SECRET_NAMES=({' '.join(t.secrets)})",
        "# Appended to the hosts file between marker lines, replacing any earlier block of this stack.",
        "HOSTS_BLOCK=$(cat <<'EOF'",
        render_hosts(nodes, config.cluster.topology == "pods").rstrip("\n"),
        "EOF",
        ")",
    ]
    return lines


def _job(stack: str, config: StackConfig, nodes: Sequence[Node], rank: int) -> _Job:
    node = next((n for n in nodes if n.rank == rank), None)
    if node is None:
        raise ValueError(f"no node with rank {rank} among ranks {[n.rank for n in nodes]}")
    if config.cluster.topology == "cluster":
        name = slurm_job_name(stack, config)  # the stack's name unless a Slurm stack names its job
        return _Job(name, rank, len(nodes), nodes[0].ip, True, rank, nodes[0].pod_id, nodes[0].boot)
    # A pod of the pool is a single-node job of its own, so it is its own primary.
    return _Job(f"{stack}-pod-{rank}", 0, 1, "127.0.0.1", False, rank, node.pod_id, node.boot)


def _checked(nodes: Sequence[Node], pool: bool = False) -> list[Node]:
    """Nodes in rank order: 0..n-1 (`pool`: distinct pod indices, a gap where a trial ended)."""
    ordered = sorted(nodes, key=lambda n: n.rank)
    ranks = [n.rank for n in ordered]
    if pool and ordered and ranks[0] >= 0 and len(set(ranks)) == len(ranks):
        pass
    elif ranks != list(range(len(ordered))) or not ordered:
        raise ValueError(f"node ranks must be 0..n-1 with no gaps, got {[n.rank for n in nodes]}")
    bad = [n.rank for n in ordered if not _ADDR_RE.match(n.ip)]
    if bad:
        raise ValueError(f"nodes {bad} have no usable IP address (got {[ordered[r].ip for r in bad]})")
    return ordered
