"""H100Cluster: the thin component that declares one stack's RunPod resources and renders its node artifacts.

The program (`__main__.py`) does, in order:

    config = read_stack_config()                     # or load_stack_config(<dict>) in tests
    cluster = H100Cluster(stack, H100ClusterArgs(config, read_secret_values(config), endpoint))
    if not pulumi.runtime.is_dry_run():
        cluster.artifacts.apply(lambda a: write_artifacts(Path("out") / stack, a))
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from common.contract import COMPONENT_TYPE
from common.outputs import BilledIds, ForecastOutput, NodeOutput, SshEndpoint
from components import names
from components.alerts import stack_alert_rules
from components.artifacts import write_artifacts
from components.delivery import deliver_to_nodes
from components.render import Artifacts, Node, render_artifacts
from facts.gpus import GPUS
from facts.money import burn_per_hour
from forecast.compare import stack_output
from forecast.stack import run_cost, stack_forecast
from providers.runpod.cluster import InstantCluster
from providers.runpod.inputs import (
    ContainerFields,
    InstantClusterInputs,
    NetworkVolumeInputs,
    PlacementInputs,
    PodInputs,
    RegistryAuthInputs,
    TrainingInputs,
)
from providers.runpod.outputs import ClusterNode
from providers.runpod.pod import Pod
from providers.runpod.registry import RegistryAuth
from providers.runpod.volume import NetworkVolume
from providers.s3.bucket import CheckpointBucket
from providers.s3.inputs import CheckpointBucketInputs
from stackconfig.config import (
    NAMESPACE,
    REGISTRY_PASSWORD_KEY,
    SECRETS_KEY,
    ConfigError,
    ConfigProblem,
    StackConfig,
    secret_config_key,
)
from stackconfig.derived import run_cost_cap
from stackconfig.loader import load_stack_config
from stackconfig.supervisor import data_center_order

__all__ = ["H100Cluster", "H100ClusterArgs", "read_secret_values", "read_stack_config", "write_artifacts"]

SSH_PORTS = ["22/tcp"]


@dataclass(frozen=True)
class H100ClusterArgs:
    """Inputs of H100Cluster."""

    config: StackConfig
    # env var name (as listed in training.secrets) -> its value, a Pulumi secret; never rendered anywhere
    secret_values: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    s3_endpoint_url: str | None = None  # default S3 endpoint for the nodes (moto, MinIO, ...)
    # cluster.registry_auth's password (a Pulumi secret), for pods pulling a private image
    registry_password: pulumi.Input[str] | None = None


class H100Cluster(pulumi.ComponentResource):
    """An Instant Cluster (topology `cluster`) or a pool of independent pods (`pods`), with its network
    volume and checkpoint bucket, the nodes' secrets delivered over SSH; outputs the nodes, the rendered
    artifacts and the costs."""

    nodes: pulumi.Output[list[dict[str, Any]]]  # NodeOutput.to_output, in rank order
    artifacts: pulumi.Output[Artifacts]  # not a stack output: for write_artifacts
    hostfile: pulumi.Output[str]
    hosts: pulumi.Output[str]
    start_scripts: pulumi.Output[dict[str, str]]
    cost_per_hour: pulumi.Output[float]
    cost_per_run: pulumi.Output[float]
    cost_per_run_basis: str  # what cost_per_run is: the forecast's hours, or max_run_hours
    billed_ids: pulumi.Output[dict[str, Any]]  # BilledIds.to_output: cluster_id, volume_id (None: none)
    forecast: dict[str, Any] | None  # ForecastOutput.to_output: memory, hours, run cost; plain data

    def __init__(self, name: str, args: H100ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT_TYPE, name, None, opts)
        cfg = args.config
        _require_secret_values(cfg, args.secret_values)
        # From the config alone, so it is known at preview, where the policy pack reads it from this
        # component's outputs; None when the stack declares no training.model. First, before any child:
        # a forecast that raises must stop the program before anything rents (components/guards.py).
        # `compare` holds the cheapest feasible GPU type, node count and sharding (forecast.compare).
        prediction = stack_forecast(cfg)
        raw_forecast = stack_output(cfg, prediction)
        self.forecast = None if raw_forecast is None else ForecastOutput.from_output(raw_forecast).to_output()
        compute = self._compute(name, args)
        # The thresholds node 0's aggregator applies (and the stack exports), from this forecast's hours.
        self.alert_rules = stack_alert_rules(cfg, prediction)
        self._outputs(name, args, compute)

    def _compute(self, name: str, args: H100ClusterArgs) -> Compute:
        """The stateful children (volume, bucket), then the compute the run phase declares."""
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        # Stateful or expensive: guarded against `destroy` and replaces where the stack asks (prod).
        guarded = pulumi.ResourceOptions(parent=self, protect=cfg.protect)
        volume = self._volume(name, cfg, guarded)
        bucket = self._bucket(name, cfg, args.s3_endpoint_url, guarded)
        props = _container_fields(name, cfg, volume)
        phase = compute_phase(cfg)
        # delete_before_replace as an option, not only in the providers' diff: a replace the supervisor forces
        # (`pulumi up --replace`) has no changed input, so the diff's answer is not asked and
        # Pulumi would create first. The new cluster's create then adopted the old one by its name (the
        # provider's recovery from an interrupted create) and waited for the member that was lost; and two
        # clusters (or two pods) would bill at once.
        after = pulumi.ResourceOptions(
            parent=self,
            depends_on=[bucket] if bucket else [],
            protect=phase.protect,
            delete_before_replace=True,
        )
        stored: list[Any] = [volume] if volume else []
        registry = self._registry(name, cfg, args.registry_password, child)
        volume_id = volume.volume_id if volume else None
        if phase.released:  # compute released: volume and bucket stay
            return Compute(pulumi.Output.from_input([]), stored, None, volume_id)
        if cfg.cluster.topology == "cluster":
            cluster = InstantCluster(f"{name}-cluster", _cluster_inputs(name, cfg, props, volume), after)
            return Compute(
                cluster.nodes.apply(_cluster_nodes), [*stored, cluster], cluster.cluster_id, volume_id
            )
        pods = _pool(name, cfg, phase, props, registry, volume, after)
        live = {i: p for i, p in pods.items() if i in phase.running(cfg.cluster.nodes)}
        nodes = (
            pulumi.Output.all(
                *[
                    pulumi.Output.all(i, p.private_ip, p.pod_id, p.ssh_host, p.ssh_port, p.boots)
                    for i, p in live.items()
                ]
            ).apply(_pod_nodes)
            if live
            else pulumi.Output.from_input([])
        )
        return Compute(nodes, [*stored, *pods.values()], None, volume_id)

    def _outputs(self, name: str, args: H100ClusterArgs, compute: Compute) -> None:
        """The rendered artifacts, their delivery, the costs, and the outputs the readers parse with
        common/outputs.py (NodeOutput, BilledIds, ForecastOutput)."""
        cfg, rules, nodes, priced = args.config, self.alert_rules, compute.nodes, compute.priced
        self.artifacts = nodes.apply(
            lambda ns: (
                render_artifacts(name, cfg, ns, args.s3_endpoint_url, rules) if ns else Artifacts("", "")
            )
        )
        self.nodes = nodes.apply(lambda ns: [_node_output(n) for n in ns])
        # What RunPod bills under its own id (scripts/watch reads the bill); members bill under their cluster.
        self.billed_ids = pulumi.Output.all(cluster_id=compute.cluster_id, volume_id=compute.volume_id).apply(
            lambda ids: BilledIds(**ids).to_output()
        )
        # Copies each node's files over SSH and starts its script, when trainstack:delivery_enabled is true.
        self.deliveries = (
            []
            if cfg.run.phase == "released"
            else deliver_to_nodes(
                name, cfg, nodes, self.artifacts, pulumi.ResourceOptions(parent=self), args.secret_values
            )
        )
        self.hostfile = self.artifacts.apply(lambda a: a.hostfile)
        self.hosts = self.artifacts.apply(lambda a: a.hosts)
        self.start_scripts = self.artifacts.apply(lambda a: dict(a.start_scripts))
        self.cost_per_hour = pulumi.Output.all(
            *[r.cost_per_hour for r in priced], *[r.storage_cost_per_month for r in priced]
        ).apply(lambda costs: _hourly(costs, len(priced)))
        # The one run cost (forecast.stack.run_cost): the hours the forecast needs when the stack declares a
        # model, else max_run_hours, at the stack's price; `cost_per_run_basis` says which.
        run = run_cost(cfg)
        self.cost_per_run = self.cost_per_hour.apply(lambda c: round(c * run.hours, 2))
        self.cost_per_run_basis = run.label
        # The scripts themselves (~19 KB a node) stay out of the state: the engine rewrites the whole
        # checkpoint at every step, so 250 nodes' scripts made each write ~5 MB and a destroy quadratic.
        # Their digests still show in a preview diff which nodes' scripts a change touches.
        self.register_outputs(
            {
                "nodes": self.nodes,
                "hostfile": self.hostfile,
                "hosts": self.hosts,
                "start_script_sha256": self.start_scripts.apply(_digests),
                "cost_per_hour": self.cost_per_hour,
                "cost_per_run": self.cost_per_run,
                "cost_per_run_basis": self.cost_per_run_basis,
                "forecast": self.forecast,
                "billed_ids": self.billed_ids,
                # The run's one cost cap (trainstack:run.max_cost_usd; 0: none): the policy pack reads it.
                "run_cost_cap_usd": run_cost_cap(cfg),
            }
        )

    @staticmethod
    def _registry(
        name: str, cfg: StackConfig, password: pulumi.Input[str] | None, opts: pulumi.ResourceOptions
    ) -> RegistryAuth | None:
        auth = cfg.cluster.registry_auth
        if auth is None or cfg.cluster.topology == "cluster":  # clusters: refused by the config rules
            return None
        if password is None:
            raise ValueError(
                f"cluster.registry_auth needs `pulumi config set --secret {REGISTRY_PASSWORD_KEY} ...`"
            )
        inputs = RegistryAuthInputs(
            name=names.registry_name(name, auth.name), username=auth.username, password=password
        )
        return RegistryAuth(f"{name}-registry", inputs, opts)

    @staticmethod
    def _volume(name: str, cfg: StackConfig, opts: pulumi.ResourceOptions) -> NetworkVolume | None:
        c = cfg.cluster
        if not c.volume_gb:
            return None
        # One data center pins the volume; several are candidates, and the volume's check() commits to
        # the first with stock for the compute (docs/FORECAST.md): the cluster and pods then follow it.
        several = len(c.data_centers) > 1
        placement = PlacementInputs(
            candidates=list(_candidates(cfg)),
            gpu_type_id=GPUS[c.gpu_type].api_id,
            gpu_count=c.gpus_per_node,
            product="CLUSTER" if c.topology == "cluster" else "POD",
            cloud=c.cloud,
        )
        return NetworkVolume(
            f"{name}-volume",
            NetworkVolumeInputs(
                name=names.volume_name(name),
                size_gb=c.volume_gb,
                data_center_id=None if several else c.data_centers[0],  # config: at least one
                volume_type=c.volume_type,
                placement=placement if several else None,
            ),
            opts,
        )

    @staticmethod
    def _bucket(
        name: str, cfg: StackConfig, endpoint_url: str | None, opts: pulumi.ResourceOptions
    ) -> CheckpointBucket | None:
        b = cfg.bucket
        if b is None:
            return None
        return CheckpointBucket(
            f"{name}-checkpoints",
            CheckpointBucketInputs(
                bucket_name=b.name,
                region=b.region,
                kms_key_id=b.kms_key_id,
                # Stated, not left to the provider's defaults, so the policy pack sees them at preview.
                versioning=True,  # an overwritten or deleted checkpoint stays recoverable
                encryption=True,  # SSE-KMS with kms_key_id, else SSE-S3
                block_public_access=True,
                tls_only=True,
                endpoint_url=endpoint_url,
                force_destroy=b.force_destroy,
                # Tagged on the bucket at create: a create cut short is adopted by this stack, never by
                # another (providers/s3/bucket.py).
                owner=f"{pulumi.get_organization()}/{pulumi.get_project()}/{name}",
            ),
            opts,
        )


@dataclass(frozen=True)
class Compute:
    """What `_compute` declared: the nodes (rank order), every priced child, and the ids RunPod bills."""

    nodes: pulumi.Output[list[Node]]
    priced: list[Any]  # each has cost_per_hour and storage_cost_per_month
    cluster_id: pulumi.Input[str] | None  # the Instant Cluster's (a pool's members bill under their own)
    volume_id: pulumi.Input[str] | None


@dataclass(frozen=True)
class ComputePhase:
    """What trainstack:run (stackconfig/supervisor.py) asks of the compute. Pure, from the config."""

    released: bool  # no compute declared: volume and bucket stay
    stopped: bool  # release_mode stop: a pool's pods kept, declared stopped (no GPU billed, nothing runs)
    protect: bool  # `releasing` lifts protect from the compute alone, so `released` can remove it
    ended: frozenset[int]  # a pool's trials that ended while others run (trainstack:run.ended_trials)
    lifted: frozenset[int]  # a pool's trials whose pods lose protect first (releasing or ended)
    keep_stopped: bool  # an ended trial's pod is kept stopped (release_mode stop), else deleted

    def declared(self, nodes: int) -> list[int]:
        """The pool indexes that are declared at all."""
        return [i for i in range(nodes) if i not in self.ended or self.keep_stopped]

    def running(self, nodes: int) -> list[int]:
        """The pool indexes declared running (the stack's nodes)."""
        return [] if self.stopped else [i for i in range(nodes) if i not in self.ended]


def compute_phase(cfg: StackConfig) -> ComputePhase:
    phase, mode = cfg.run.phase, cfg.supervisor.release_mode
    # release_mode stop (loose on-demand pods only, stackconfig/rules.py): `released` keeps the pods,
    # declared stopped; they bill no GPU and run nothing, so the stack shows no nodes.
    stopped = phase == "released" and mode == "stop" and cfg.cluster.topology == "pods"
    ended = frozenset(cfg.run.ended_trials)
    return ComputePhase(
        released=phase == "released" and not stopped,
        stopped=stopped,
        protect=cfg.protect and phase == "active",
        ended=ended,
        # On a protected stack the supervisor first lifts an ending trial's protection (an update that
        # changes nothing at RunPod), then ends it: Pulumi never deletes a protected resource.
        lifted=frozenset(cfg.run.releasing_trials) | ended,
        keep_stopped=mode == "stop",
    )


def _require_secret_values(cfg: StackConfig, values: Mapping[str, pulumi.Input[str]]) -> None:
    missing = [s for s in cfg.training.secrets if s not in values]
    if missing:
        lines = "; ".join(f"`pulumi config set --secret {secret_config_key(s)} <value>`" for s in missing)
        raise ValueError(f"no value for secrets {', '.join(missing)}; set each: {lines}")


def _pool(
    name: str,
    cfg: StackConfig,
    phase: ComputePhase,
    props: ContainerFields,
    registry: RegistryAuth | None,
    volume: NetworkVolume | None,
    after: pulumi.ResourceOptions,
) -> dict[int, Pod]:
    """A pool's pods by index. A trial that ended while others run has its pod alone released: stopped under
    release_mode stop, else not declared (deleted). The other pods keep their index, their rank and their
    files (each pool pod's files are its own), so nothing of theirs changes and no running trial restarts."""
    unprotected = pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(protect=False))
    return {
        i: Pod(
            f"{name}-pod-{i}",
            _pod_inputs(name, i, cfg, props, registry, volume, phase.stopped or i in phase.ended),
            unprotected if i in phase.lifted else after,
        )
        for i in phase.declared(cfg.cluster.nodes)
    }


def _container_fields(name: str, cfg: StackConfig, volume: NetworkVolume | None) -> ContainerFields:
    """Inputs shared by pods and clusters."""
    c, t = cfg.cluster, cfg.training
    return ContainerFields(
        image=c.image,
        gpu_type_id=GPUS[c.gpu_type].api_id,
        # No secret here, not even a reference: RunPod's pod definition is plain text to anyone with console
        # access, and its secret store is GraphQL's. The values reach each node over SSH, in a file only its
        # start script reads (delivery:SecretsFile, components/delivery.py).
        env={names.OWNER_ENV: names.owner_mark(pulumi.get_project(), name)},
        ports=SSH_PORTS,
        container_disk_gb=c.container_disk_gb,
        volume_mount_path=c.volume_mount_path,
        start_ssh=True,
        training=TrainingInputs(
            checkpoint_bucket=cfg.bucket.name if cfg.bucket else None,
            checkpoint_interval_s=t.checkpoint_interval_min * 60,
            max_run_hours=t.max_run_hours,
        ),
        # The resource id, not the `volume_id` output: while the volume is updated in place (it grew),
        # preview knows the id but not the outputs, and an unknown volume_id would show the cluster or
        # pods as replaced.
        volume_id=volume.id if volume is not None else None,
    )


def _candidates(cfg: StackConfig) -> tuple[str, ...]:
    """trainstack:cluster.data_centers in the order they are tried; one that failed twice this run comes
    last (trainstack:recovery)."""
    return data_center_order(cfg.cluster.data_centers, cfg.recovery.avoid_data_centers)


def _pinned(cfg: StackConfig, volume: NetworkVolume | None) -> pulumi.Input[str] | None:
    """The one data center the compute must use: the stack's only one, else the volume's (which its
    check() chose from the candidates); None when the compute may try the candidates itself."""
    c = cfg.cluster
    if len(c.data_centers) == 1:
        return c.data_centers[0]
    return volume.data_center_id if volume is not None else None


def _cluster_inputs(
    name: str, cfg: StackConfig, common: ContainerFields, volume: NetworkVolume | None = None
) -> InstantClusterInputs:
    c = cfg.cluster
    return InstantClusterInputs(
        **common,
        name=names.cluster_name(name),
        cluster_type="SLURM" if c.scheduler == "slurm" else "TRAINING",
        gpu_count_per_pod=c.gpus_per_node,
        pod_count=c.nodes,
        data_center_id=_pinned(cfg, volume),  # config guarantees at least one for a cluster
        # Several: create falls back along them on "no instances available" (unless pinned by a volume).
        data_center_ids=list(_candidates(cfg)) if len(c.data_centers) > 1 else None,
    )


def _pod_inputs(
    name: str,
    index: int,
    cfg: StackConfig,
    common: ContainerFields,
    registry: RegistryAuth | None = None,
    volume: NetworkVolume | None = None,
    stopped: bool = False,
) -> PodInputs:
    c = cfg.cluster
    pinned = _pinned(cfg, volume) if volume is not None else None
    return PodInputs(
        **common,
        name=names.pod_name(name, index),
        gpu_count=c.gpus_per_node,
        cloud=c.cloud,
        # In order, RunPod placing the pod in the first with capacity; a volume pins them to its own.
        data_center_ids=[pinned] if pinned is not None else list(_candidates(cfg)),
        capacity=c.capacity,
        bid_per_gpu=c.bid_per_gpu,
        # Gives each pod a private IP for the hosts file (100 Mbps: never for NCCL; see the Instant Clusters
        # docs cited in facts.sources).
        global_networking=True,
        min_cuda_version=GPUS[c.gpu_type].min_cuda_version,
        registry_id=None if registry is None else registry.registry_id,
        desired_status="EXITED" if stopped else None,  # None: running, the provider's default
    )


def _cluster_nodes(raw: Sequence[Mapping[str, Any]] | None) -> list[Node]:
    out = []
    for n in (ClusterNode.from_output(r) for r in raw or []):
        if n.rank is None or n.ip is None or n.ssh_host is None or n.ssh_port is None:
            # create waits for every member to be ready, so only a broken state gets here
            raise ValueError(f"cluster member {n.pod_id} has no rank, fabric ip or SSH endpoint yet")
        out.append(Node(n.rank, n.ip, n.pod_id, n.ssh_host, n.ssh_port))
    return out


def _pod_nodes(rows: Sequence[Sequence[Any]]) -> list[Node]:
    """A pool's running pods, each ranked by its index in the pool (a trial that ended leaves a gap)."""
    return [
        Node(int(rank), str(ip), str(pod_id), str(host), int(port), int(boots or 0))
        for rank, ip, pod_id, host, port, boots in rows
    ]


def _node_output(n: Node) -> dict[str, Any]:
    # A pod started again after a declared stop: its boot is part of the run id (scripts/supervise reads it).
    ssh = SshEndpoint(n.ssh_host, n.ssh_port)
    return NodeOutput(rank=n.rank, ip=n.ip, pod_id=n.pod_id, ssh=ssh, boot=n.boot).to_output()


def _digests(files: Mapping[str, str]) -> dict[str, str]:
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(files.items())}


def _hourly(costs: Sequence[Any], count: int) -> float:
    """USD/h: compute per hour plus monthly storage spread over the month's hours (the one rule,
    facts.money.burn_per_hour, that stackconfig/pricing.py applies to the config)."""
    hourly = sum(float(c or 0) for c in costs[:count])
    monthly = sum(float(c or 0) for c in costs[count:])
    return round(burn_per_hour(hourly, monthly), 2)


def read_stack_config() -> StackConfig:
    """The stack's `trainstack:*` config, every key of it, parsed (raises ConfigError).

    Every key is read, not only the known ones, so a misspelt key (`trainstack:clustr`) is an error that
    names it rather than a setting silently ignored. Secret values (`trainstack:secrets.*`) are skipped
    here and read by `read_secret_values`.
    """
    prefix = f"{NAMESPACE}:"
    cfg = pulumi.Config(NAMESPACE)
    keys = {k[len(prefix) :] for k in pulumi.runtime.config.CONFIG.get() if k.startswith(prefix)}
    keys = {k for k in keys if not k.startswith(f"{SECRETS_KEY}.")}
    raw = {key: value for key in sorted(keys) if (value := cfg.get(key)) is not None}
    # Every declared secret without a value is named with the other problems, in one message.
    given = pulumi.runtime.config.CONFIG.get()
    has_secret = lambda env: secret_config_key(env) in given  # noqa: E731
    return load_stack_config(raw, warn=pulumi.log.warn, has_secret=has_secret)


def read_registry_password(config: StackConfig) -> pulumi.Output[str] | None:
    """cluster.registry_auth's password, from its secret config key (None when no registry is named)."""
    if config.cluster.registry_auth is None:
        return None
    value = pulumi.Config(NAMESPACE).get_secret(REGISTRY_PASSWORD_KEY.split(":", 1)[1])
    if value is None:
        fix = f"has no value; set it with `pulumi config set --secret {REGISTRY_PASSWORD_KEY} <password>`"
        raise ConfigError([ConfigProblem(REGISTRY_PASSWORD_KEY, fix)])
    return value


def read_secret_values(config: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Each secret in training.secrets, from its `trainstack:secrets.<NAME>` key (set without --path)."""
    cfg = pulumi.Config(NAMESPACE)
    values: dict[str, pulumi.Output[str]] = {}
    problems = []
    for env in config.training.secrets:
        key = secret_config_key(env)
        value = cfg.get_secret(key.split(":", 1)[1])
        if value is None:
            fix = f"has no value; set it with `pulumi config set --secret {key} <value>`"
            problems.append(ConfigProblem(key, fix))
        else:
            values[env] = value
    if (
        config.cluster.registry_auth is not None
        and cfg.get_secret(REGISTRY_PASSWORD_KEY.split(":", 1)[1]) is None
    ):
        fix = f"has no value; set it with `pulumi config set --secret {REGISTRY_PASSWORD_KEY} <password>`"
        problems.append(ConfigProblem(REGISTRY_PASSWORD_KEY, fix))  # named with the others, in one message
    if problems:
        raise ConfigError(problems)
    return values
