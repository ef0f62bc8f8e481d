"""What would make a workload that does not fit its GPUs fit: each change tried alone, cheapest first.

The order is what each change costs: sharding further costs communication only, activation checkpointing
about a third more compute, a smaller micro-batch some utilisation (the global batch is kept with gradient
accumulation), more GPUs money by the hour.
"""

from __future__ import annotations

from forecast.memory import memory
from forecast.model import SHARDING_ORDER, Deployment, Workload

MAX_GPUS_PER_JOB = 512  # searched for the "more GPUs" fix: 64 nodes of 8


def memory_fixes(w: Workload, d: Deployment) -> tuple[str, ...]:
    """Changes that each make the workload fit, cheapest first; a combination when none does alone."""
    found = [
        fix
        for fix in (_shard(w, d), _checkpoint(w, d), _micro_batch(w, d), _more_gpus(w, d), _larger_gpu(w, d))
        if fix is not None
    ]
    return tuple(found) if found else (_combined(w, d),)


def _gpus(gpus: int, d: Deployment) -> str:
    """A job's GPUs, and the nodes they are where they are whole nodes of the GPU's board (8 a node for
    H100, H200 and B200): more than one node is one job only in an Instant Cluster."""
    per_node = _per_node(d.gpu.name)
    if not per_node or gpus % per_node or gpus == d.gpus_per_job:
        return f"{gpus} GPUs"
    nodes = gpus // per_node
    return f"{gpus} GPUs, {nodes} nodes of {per_node} (topology cluster, cluster.nodes {nodes})"


def _per_node(gpu: str) -> int | None:
    from facts.gpus import GPUS

    spec = GPUS.get(gpu)
    return spec.gpus_per_node if spec is not None else None


def _larger_gpu(w: Workload, d: Deployment, most_gpus: int = 0) -> str | None:
    """The smallest GPU type with more memory that fits the job (its GPUs as they are, or the fewest up to
    `most_gpus`): the GPU to name in `cluster.gpu_type`; None when none does."""
    from facts.gpus import GPUS
    from forecast.stack import hardware  # forecast.stack imports this module's caller

    for spec in sorted(GPUS.values(), key=lambda g: g.memory_gb):
        if spec.memory_gb <= d.gpu.memory_gb or spec.peak_tflops(w.precision) is None:
            continue
        for gpus in range(d.gpus_per_job, max(most_gpus, d.gpus_per_job) + 1, d.gpus_per_job):
            mem = memory(w, hardware(spec), gpus)
            if mem.fits:
                where = "" if gpus == d.gpus_per_job else f" on {gpus} GPUs"
                return (
                    f"a larger GPU: cluster.gpu_type {spec.key}{where} ({spec.memory_gb:g} GB: "
                    f"{mem.total:.1f} GB per GPU, at most {mem.total_high:.1f})"
                )
    return None


def _total(w: Workload, d: Deployment, gpus: int | None = None) -> str | None:
    """Per-GPU GB, the central estimate and the band's upper end, when that end fits; else None."""
    mem = memory(w, d.gpu, gpus or d.gpus_per_job)
    return f"{mem.total:.1f} GB per GPU, at most {mem.total_high:.1f}" if mem.fits else None


def _shard(w: Workload, d: Deployment) -> str | None:
    for mode in SHARDING_ORDER[SHARDING_ORDER.index(w.sharding) + 1 :]:
        total = _total(w._replace(sharding=mode), d)
        if total is not None:
            return f"shard further: sharding {mode} ({total})"
    return None


def _checkpoint(w: Workload, d: Deployment) -> str | None:
    if w.activation_checkpointing:
        return None
    total = _total(w._replace(activation_checkpointing=True), d)
    if total is None:
        return None
    return f"checkpoint activations: activation_checkpointing true ({total}; ~33 % more compute)"


def _micro_batch(w: Workload, d: Deployment) -> str | None:
    b = w.micro_batch_per_gpu // 2
    while b >= 1:
        total = _total(w._replace(micro_batch_per_gpu=b), d)
        if total is not None:
            return (
                f"smaller micro-batch: micro_batch_per_gpu {b} ({total}; keep the global "
                "batch with gradient accumulation)"
            )
        b //= 2
    return None


def _more_gpus(w: Workload, d: Deployment) -> str | None:
    if w.sharding == "ddp":
        return None  # every GPU holds the whole model states: more of them change nothing
    step = d.gpus_per_job
    for gpus in range(step * 2, MAX_GPUS_PER_JOB + 1, step):
        total = _total(w, d, gpus)
        if total is not None:
            return f"more GPUs: {_gpus(gpus, d)} in the job instead of {_gpus(d.gpus_per_job, d)} ({total})"
    return None


def _combined(w: Workload, d: Deployment) -> str:
    best = w._replace(sharding="zero3", activation_checkpointing=True, micro_batch_per_gpu=1)
    for gpus in range(d.gpus_per_job, MAX_GPUS_PER_JOB + 1, d.gpus_per_job):
        total = _total(best, d, gpus)
        if total is not None:
            return (
                f"no single change is enough; together: sharding zero3, activation_checkpointing true, "
                f"micro_batch_per_gpu 1 on {_gpus(gpus, d)} in the job ({total})"
            )
    larger = _larger_gpu(best, d, MAX_GPUS_PER_JOB)
    instead = (
        f"with them {larger.removeprefix('a ')}, or LoRA"
        if larger
        else "LoRA (no GPU RunPod rents fits it with full training)"
    )
    return (
        f"does not fit {d.gpu.name} ({d.gpu.memory_gb:g} GB) even with sharding zero3, activation "
        f"checkpointing and micro-batch 1 on {MAX_GPUS_PER_JOB} GPUs: use {instead}, or a shorter "
        "sequence_length"
    )
