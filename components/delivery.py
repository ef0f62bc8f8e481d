"""Wiring of `delivery:NodeFiles` and `delivery:SecretsFile`: which files and secrets each node gets, and
whether delivery can run at all."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pulumi

from common.loopback import is_loopback_url
from components import slurm
from components.render import Artifacts, Node, job_files
from providers import settings
from providers.delivery.node_files import NodeFiles, NodeFilesInputs
from providers.delivery.secrets_file import SecretsFile, SecretsFileInputs, secrets_path
from providers.settings import known_hosts_file
from stackconfig.config import StackConfig

REPO = Path(__file__).resolve().parent.parent
TRAIN_DIR = REPO / "train"


def train_files(root: Path = TRAIN_DIR) -> dict[str, str]:
    """The repo's train/ directory as `train/<path>` -> text (sources only, no caches)."""
    return {
        f"train/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".txt", ".json", ".yaml")
    }


def node_files(artifacts: Artifacts, rank: int, train: dict[str, str]) -> dict[str, str]:
    """What node `rank` gets: the hostfile, hosts, its own start script, and train/."""
    script = f"start-node-{rank}.sh"
    # A pool pod's hostfile and hosts name itself alone (each trial is its own job): no other trial's start
    # or end changes its files.
    pool = rank in artifacts.own_hosts
    hostfile, hosts = artifacts.own_hosts.get(rank, (artifacts.hostfile, artifacts.hosts))
    hostfile_name, hosts_name, _state = job_files(pool, rank)
    own = {hostfile_name: hostfile, hosts_name: hosts, script: artifacts.start_scripts[script]}
    # The aggregator (train/monitor/aggregator.py) runs on each job's first node: a cluster's node 0, every
    # pool pod.
    if (rank == 0 or pool) and artifacts.alerts_json:
        own["alerts.json"] = artifacts.alerts_json
    return own | slurm.node_files(artifacts.start_scripts) | train


def control_plane_only_reason(api_url: str | None = None) -> str | None:
    """Why delivery cannot work here: a local RunPod without hosts. None for real RunPod or hosts on."""
    url = api_url or settings.current().runpod_api_url or pulumi.Config("runpod").get("apiUrl")
    if not is_loopback_url(url or settings.DEFAULT_API_URL):  # the target rule's own reading (issue #62)
        return None
    # One GET on loopback: the standard library's client, so the Pulumi program never loads httpx (~0.1 s).
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/_admin/health", timeout=5) as answer:  # noqa: S310 (loopback)
            health = json.loads(answer.read())
    except (OSError, ValueError) as exc:
        return f"the local RunPod at {url} did not answer its admin API ({type(exc).__name__})"
    hosts = health.get("hosts") or {}
    if hosts.get("enabled"):
        return None
    return f"the local RunPod at {url} is control-plane only ({hosts.get('reason') or 'no hosts field'})"


def deliver_to_nodes(
    stack: str,
    config: StackConfig,
    nodes: pulumi.Output[list[Node]],
    artifacts: pulumi.Output[Artifacts],
    opts: pulumi.ResourceOptions,
    secret_values: Mapping[str, pulumi.Input[str]] | None = None,
) -> list[NodeFiles]:
    """One NodeFiles per node when `trainstack:delivery_enabled` is true and nodes can be reached, after the
    node's SecretsFile when the stack has secrets (`secret_values`: env name -> Pulumi secret)."""
    if not config.delivery_enabled:
        if config.training.secrets and pulumi.runtime.is_dry_run():
            pulumi.log.warn(
                f"trainstack:delivery_enabled is false: the secrets {', '.join(config.training.secrets)} "
                "reach "
                "no node (trainstack puts no secret in RunPod's pod definition); whatever starts the nodes "
                "must deliver them (providers/delivery/secrets_file.py, docs/OPERATING.md)"
            )
        return []
    reason = control_plane_only_reason()
    if reason is not None:
        # Said once per command: in the preview, which `up` runs before the update.
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(
                f"delivery skipped: {reason}; the nodes get no start scripts and nothing trains. Run the "
                "local RunPod as root with --hosts on (scripts/local-runpod does as root) to deliver and "
                "start them."
            )
        return []
    train = train_files()
    known_hosts = known_hosts_file(stack)
    out = []
    ended = set(config.run.ended_trials)  # a pool's ended trials: their pods run nothing more
    for rank in (r for r in range(config.cluster.nodes) if r not in ended):
        node = nodes.apply(functools.partial(_node, rank=rank))
        secrets = _secrets_file(stack, rank, node, secret_values or {}, known_hosts, opts)
        after = (
            opts
            if secrets is None
            else pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[secrets]))
        )
        out.append(
            NodeFiles(
                f"{stack}-deliver-{rank}",
                NodeFilesInputs(
                    host=node.apply(lambda n: n.ssh_host),
                    port=node.apply(lambda n: n.ssh_port),
                    pod_id=node.apply(lambda n: n.pod_id),
                    rank=rank,
                    remote_dir=config.training.workdir,
                    files=artifacts.apply(functools.partial(node_files, rank=rank, train=train)),
                    start_script=slurm.start_script(config, rank),
                    known_hosts=known_hosts,
                    # New secret values restart the start script, which reads them at its start.
                    secrets_version=None if secrets is None else secrets.version,
                ),
                after,
            )
        )
    return out


def _secrets_file(
    stack: str,
    rank: int,
    node: pulumi.Output[Node],
    values: Mapping[str, pulumi.Input[str]],
    known_hosts: str,
    opts: pulumi.ResourceOptions,
) -> SecretsFile | None:
    """The node's secrets file (providers/delivery/secrets_file.py), written before its start script runs;
    None for a stack without secrets. Deleted before any replacement: both write the one path."""
    if not values:
        return None
    return SecretsFile(
        f"{stack}-secrets-{rank}",
        SecretsFileInputs(
            host=node.apply(lambda n: n.ssh_host),
            port=node.apply(lambda n: n.ssh_port),
            pod_id=node.apply(lambda n: n.pod_id),
            boot=node.apply(lambda n: n.boot),
            path=node.apply(lambda n: secrets_path(n.pod_id)),
            values=dict(values),
            known_hosts=known_hosts,
        ),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
    )


def _node(nodes: Sequence[Node], rank: int) -> Node:
    found = [n for n in nodes if n.rank == rank]
    if not found:
        raise ValueError(f"no node of rank {rank} among {[n.rank for n in nodes]}")
    return found[0]
