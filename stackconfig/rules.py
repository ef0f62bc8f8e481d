"""Rules that span several stack config fields (single-field rules sit on the models in config.py)."""

from __future__ import annotations

from collections.abc import Mapping

from facts.gpus import GPUS, GpuSpec
from facts.money import DEFAULT_SPEND_LIMIT_PER_HOUR
from stackconfig.config import StackConfig
from stackconfig.model import shape_problem
from stackconfig.pricing import cost_per_hour, gpu_hour_price
from stackconfig.slurm import SLURM_IMAGE_EXAMPLE, is_runpod_pytorch_image

SPOT_MAX_CHECKPOINT_INTERVAL_MIN = 30  # a spot pod gets a 5 s notice: the timer is what limits lost work
S3_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
RUNPOD_DEFAULT_SPEND_LIMIT = DEFAULT_SPEND_LIMIT_PER_HOUR  # facts.money cites its source

Problem = tuple[str, str]  # (key path without the namespace, message ending with the fix)


def unverified_spend_limit_notice(config: StackConfig) -> str | None:
    """The warning a preview gives when the stack only fits a raised account spend limit, which no API call
    can confirm: RunPod's REST v2 (OpenAPI "Frontdoor v2.9.0") has billing history (/v2/billing) but no
    endpoint that returns the account's spend limit, so `runpod_spend_limit_per_hour` is the team's word.
    None when the stack fits RunPod's default limit (nothing to verify)."""
    cost = cost_per_hour(config)
    if cost <= RUNPOD_DEFAULT_SPEND_LIMIT:
        return None
    return (
        f"the stack costs about ${cost:.2f}/h, above RunPod's default account spend limit of "
        f"${RUNPOD_DEFAULT_SPEND_LIMIT:g}/h; trainstack:runpod_spend_limit_per_hour declares "
        f"${config.runpod_spend_limit_per_hour:g}/h, but RunPod's API does not report an account's limit, "
        "so that figure is UNVERIFIED. If the account is still at the default, `up` creates the volume, "
        "secrets and bucket and then fails on the compute. Confirm the raise with RunPod (console, Billing, "
        "or support) before `up`"
    )


def cross_field_problems(config: StackConfig) -> list[Problem]:
    """Every cross-field rule the config breaks, in a stable order."""
    return [
        *_topology_problems(config),
        *slurm_problems(config),
        *_capacity_problems(config),
        *_placement_problems(config),
        *_training_problems(config),
        *_budget_problems(config),
        *_release_problems(config),
        *_ended_trial_problems(config),
        *model_problems(config),
    ]


def _topology_problems(config: StackConfig) -> list[Problem]:
    c = config.cluster
    gpu = GPUS[c.gpu_type]
    out: list[Problem] = []
    if c.gpus_per_node not in gpu.allowed_counts:
        counts = ", ".join(map(str, gpu.allowed_counts))
        out.append(
            (
                "cluster.gpus_per_node",
                f"{c.gpu_type} pods come with {counts} GPUs, not {c.gpus_per_node}; use one of those counts",
            )
        )
    if c.topology != "cluster":
        return out
    if c.registry_auth is not None:
        out.append(
            (
                "cluster.registry_auth",
                "Instant Clusters cannot pull from private registries (RunPod's cluster create takes no "
                "registry credential: 'Private registries are not yet supported for clusters'); use a "
                "public image, or topology 'pods'",
            )
        )
    if not gpu.instant_cluster:
        out.append(
            (
                "cluster.topology",
                f"{gpu.label} has no Instant Clusters ({gpu.why}); use gpu_type "
                "H100_SXM for a cluster, or topology 'pods'",
            )
        )
    if not 2 <= c.nodes <= 8:
        out.append(
            (
                "cluster.nodes",
                f"must be 2-8 for topology 'cluster', got {c.nodes} (self-serve Instant "
                "Clusters are 2-8 nodes); use topology 'pods' for 1 node",
            )
        )
    if c.gpus_per_node != gpu.gpus_per_node:
        out.append(
            (
                "cluster.gpus_per_node",
                f"Instant Cluster nodes are whole {gpu.gpus_per_node}-GPU "
                f"machines, got {c.gpus_per_node}; set gpus_per_node: {gpu.gpus_per_node}",
            )
        )
    if config.training.nccl_min_busbw_gb_per_s <= 0:
        out.append(
            (
                "training.nccl_min_busbw_gb_per_s",
                "must be above 0 for topology 'cluster': a node off the "
                "fabric (100 Mbps) would go unnoticed; set a floor, e.g. 300",
            )
        )
    return out


def _release_problems(config: StackConfig) -> list[Problem]:
    """`supervisor.release_mode: stop` is for loose on-demand pods (docs/SUPERVISOR.md)."""
    if config.supervisor.release_mode != "stop":
        return []
    c = config.cluster
    if c.topology == "cluster":
        why = (
            "an Instant Cluster cannot be stopped: its members refuse pod actions (RunPod answers 409) and "
            "the cluster API has only create and delete; set release_mode: delete (the volume and the "
            "bucket keep the run either way)"
        )
        return [("supervisor.release_mode", why)]
    if c.capacity != "on_demand":
        why = (
            f"stop needs capacity 'on_demand', got '{c.capacity}': a stopped spot pod starts again only "
            "through the retiring GraphQL podBidResume, which REST v2 lacks; set release_mode: delete or "
            "capacity: on_demand"
        )
        return [("supervisor.release_mode", why)]
    return []


def _ended_trial_problems(config: StackConfig) -> list[Problem]:
    """`run.ended_trials` and `run.releasing_trials` (the supervisor's): pod indices of a pool, each once."""
    out: list[Problem] = []
    c = config.cluster
    for key, trials in (
        ("ended_trials", config.run.ended_trials),
        ("releasing_trials", config.run.releasing_trials),
    ):
        if not trials:
            continue
        if c.topology != "pods":
            why = "only a pool of pods (topology 'pods') ends trials one by one; remove the key"
            out.append((f"run.{key}", why))
            continue
        bad = sorted({i for i in trials if not 0 <= i < c.nodes})
        if bad or len(set(trials)) != len(trials):
            why = (
                f"pod indices 0-{c.nodes - 1}, each once, got {list(trials)}; the supervisor writes this "
                "key, remove it to run every trial's pod again"
            )
            out.append((f"run.{key}", why))
    return out


def _capacity_problems(config: StackConfig) -> list[Problem]:
    c = config.cluster
    if c.capacity == "on_demand":
        return []
    out: list[Problem] = []
    on_demand = GPUS[c.gpu_type].price_per_gpu_hour
    if c.bid_per_gpu is None or c.bid_per_gpu <= 0:
        out.append(
            (
                "cluster.bid_per_gpu",
                f"capacity {c.capacity!r} needs a spot bid in USD per GPU-hour; set bid_per_gpu (at most "
                f"the on-demand ${on_demand:.2f}), or use on_demand",
            )
        )
    elif c.bid_per_gpu > on_demand:
        # RunPod bills a spot pod its bid: above on-demand it costs more than the pod it replaces.
        out.append(
            (
                "cluster.bid_per_gpu",
                f"bids ${c.bid_per_gpu:g}/GPU-h, above the on-demand ${on_demand:.2f} for {c.gpu_type} "
                f"(facts/gpus.py); bid at most ${on_demand:.2f}, or use capacity: on_demand",
            )
        )
    if c.topology == "cluster":
        out.append(
            (
                "cluster.capacity",
                f"Instant Clusters are on-demand only, got {c.capacity!r}; set "
                "capacity: on_demand, or use topology 'pods' for spot",
            )
        )
    if c.registry_auth is not None:
        # Known at preview, unlike the pod's registry_id (an output of the credential): refused here, or an
        # `up` creates the credential, the secrets and the bucket before the pod check refuses.
        out.append(
            (
                "cluster.registry_auth",
                f"private registries need capacity 'on_demand', got {c.capacity!r}: RunPod's spot "
                "mutation takes no registry credential; use capacity: on_demand or a public image",
            )
        )
    if config.bucket is None:
        out.append(
            (
                "bucket",
                f"capacity {c.capacity!r} can lose a pod with 5 s notice and its container "
                "disk with it; configure trainstack:bucket so checkpoints survive",
            )
        )
    if config.training.checkpoint_interval_min > SPOT_MAX_CHECKPOINT_INTERVAL_MIN:
        out.append(
            (
                "training.checkpoint_interval_min",
                f"must be at most {SPOT_MAX_CHECKPOINT_INTERVAL_MIN} "
                f"with capacity {c.capacity!r}, got {config.training.checkpoint_interval_min} (a preempted "
                "pod loses everything since the last sync); lower it",
            )
        )
    return out


def _placement_problems(config: StackConfig) -> list[Problem]:
    c = config.cluster
    out: list[Problem] = []
    needs_one_dc = c.topology == "cluster" or c.volume_gb > 0
    if needs_one_dc and not c.data_centers:
        why = (
            "an Instant Cluster lives in one data center, and RunPod offers them in only some"
            if c.topology == "cluster"
            else ("a network volume is created in one data center, and the pods must be there too")
        )
        out.append(
            (
                "cluster.data_centers",
                f"must name at least one data center ({why}); list them in the order to try, e.g. "
                "['US-TX-3', 'EU-RO-1']",
            )
        )
    if c.volume_gb > 0 and c.cloud != "SECURE":
        out.append(
            ("cluster.cloud", "network volumes exist only on Secure Cloud; set cloud: SECURE or volume_gb: 0")
        )
    return out


def _training_problems(config: StackConfig) -> list[Problem]:
    t = config.training
    out: list[Problem] = []
    # torchrun's rendezvous uses master_port, the preflight's master_port + 1 (components/templates).
    taken = (config.cluster.master_port, config.cluster.master_port + 1)
    if t.metrics_port in taken:
        out.append(
            (
                "training.metrics_port",
                f"{t.metrics_port} is a rendezvous port (cluster.master_port {taken[0]} or the preflight's "
                f"{taken[1]}); pick another port, e.g. 9400",
            )
        )
    if t.checkpoint_interval_min < 1 or t.checkpoint_interval_min > t.max_run_hours * 60:
        out.append(
            (
                "training.checkpoint_interval_min",
                f"must be 1 to max_run_hours x 60 "
                f"({t.max_run_hours * 60:g}), got {t.checkpoint_interval_min}; pick an interval inside "
                "the run",
            )
        )
    missing = [name for name in S3_CREDENTIAL_ENV if name not in t.secrets]
    if config.bucket is not None and missing:
        lines = "; ".join(
            f"`pulumi config set --secret trainstack:secrets.{name} <value>`" for name in missing
        )
        out.append(
            (
                "training.secrets",
                f"a bucket is configured but the nodes would get no {', '.join(missing)} (RunPod pods have "
                f"no IAM role); add {'them' if len(missing) > 1 else 'it'} to training.secrets and set each: "
                f"{lines}",
            )
        )
    return out


def _budget_problems(config: StackConfig) -> list[Problem]:
    c = config.cluster
    cost = cost_per_hour(config)
    limit = config.runpod_spend_limit_per_hour
    if cost <= limit:
        return []
    message = (
        f"the stack costs about ${cost:.2f}/h ({c.nodes} x {c.gpus_per_node} {c.gpu_type} at "
        f"${gpu_hour_price(config):.2f}/GPU-h, the dearer of on-demand and any bid) but the account may "
        f"spend ${limit:g}/h, so the deploy would fail part-way; ask RunPod to raise the account limit and "
        "set this key to the new limit, or use fewer nodes"
    )
    return [("runpod_spend_limit_per_hour", message)]


def model_problems(config: StackConfig, gpus: Mapping[str, GpuSpec] = GPUS) -> list[Problem]:
    """Rules between the model and the rest of the stack: LoRA's fraction, the GPU's precisions (`gpus`:
    the GPU table)."""
    model = config.training.model
    if model is None:
        return []
    out: list[Problem] = []
    if model.method == "lora" and model.trainable_fraction is None:
        out.append(
            (
                "training.model.trainable_fraction",
                "method lora needs the adapters' share of the parameters; set it, e.g. 0.005 for rank-16 "
                "adapters on a 7B model",
            )
        )
    gpu = gpus[config.cluster.gpu_type]
    if gpu.peak_tflops(model.precision) is None:
        out.append(
            (
                "training.model.precision",
                f"{gpu.label} has no {model.precision} tensor cores ({gpu.perf_source}); use precision "
                "bf16, or a GPU type with FP8 (H100)",
            )
        )
    shapes = shape_problem(model)  # the shapes and the parameter count of one model agree (docs/FORECAST.md)
    if shapes is not None:
        out.append(shapes)
    return out


def slurm_problems(config: StackConfig) -> list[tuple[str, str]]:
    """(key path, message with the fix) for each Slurm rule the config breaks; none for the start scripts."""
    c = config.cluster
    if c.scheduler != "slurm":
        if c.slurm.job is not None:
            return [
                (
                    "cluster.slurm.job",
                    f"names a Slurm job ({c.slurm.job!r}) but the scheduler is {c.scheduler!r}; set "
                    "trainstack:cluster.scheduler to 'slurm', or drop cluster.slurm",
                )
            ]
        return []
    out: list[tuple[str, str]] = []
    if c.topology != "cluster":
        out.append(
            (
                "cluster.scheduler",
                f"'slurm' needs an Instant Cluster (RunPod's `type: SLURM`), but topology is {c.topology!r}; "
                "set trainstack:cluster.topology to 'cluster', or drop scheduler to use the start scripts",
            )
        )
    if not is_runpod_pytorch_image(c.image):
        out.append(
            (
                "cluster.image",
                f"{c.image!r} is not one of RunPod's official PyTorch images, the only ones on which RunPod "
                f"starts Slurm and munge; use e.g. {SLURM_IMAGE_EXAMPLE!r}, or drop scheduler: slurm",
            )
        )
    return out
