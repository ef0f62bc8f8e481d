"""Which GPUs, how many, sharded how, cheapest per run: the stack's workload on every shape RunPod rents.

$/h is the wrong unit for a training run: its cost is hours x rate, and a GPU with more memory (bigger
micro-batches fit, fewer nodes) or another node count may be cheaper per run. Like SkyPilot's optimizer this
tries every candidate and picks the cheapest feasible one; like Infracost it states the saving against the
stack as configured.

Candidates, from the GPU table (facts/gpus.py) and the stack's topology:
- `cluster` (Instant Clusters): every GPU type RunPod rents as one (`instant_cluster`: H100 SXM, H200, B200),
  2-8 nodes of 8 GPUs (the self-serve sizes, docs.runpod.io/instant-clusters/configuration);
- `pods` (a pool, one job a pod): every GPU type of the table, the stack's pod count (the number of jobs is
  the experiment's, not a cost knob), every GPU count a pod may have;
- each sharding mode (ddp, zero1, zero2, zero3).
The micro-batch, tokens, model and price source are the stack's. Feasible: the memory band's upper end fits
(forecast.memory). Cost: the GPU table's on-demand price (as the stack's own forecast uses) for the job's
forecast hours, plus the stack's storage. Pure; a few hundred microseconds for the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from components.config import StackConfig
from facts.gpus import GPUS, GpuSpec
from forecast.compute import compute, cost
from forecast.memory import memory
from forecast.model import SHARDING_ORDER, ForecastInput, Sharding, Verdict
from forecast.stack import forecast_input, hardware, stack_forecast

CLUSTER_NODES = range(
    2, 9
)  # self-serve Instant Clusters: 2-8 nodes (facts/gpus.py, sources.INSTANT_CLUSTERS)


class CompareError(ValueError):
    """A `--compare` choice that names no GPU, or one not rented in the stack's topology."""


class Option(NamedTuple):
    gpu: str  # GPU table key
    nodes: int
    gpus_per_node: int
    sharding: Sharding
    verdict: Verdict
    total_gb: float
    total_high_gb: float
    gpu_gb: float
    hours: float
    usd_per_hour: float
    run_usd: float
    configured: bool  # the stack as it is

    @property
    def feasible(self) -> bool:
        return self.verdict == "fits"

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.gpus_per_node} {self.gpu}, {self.sharding}"


class Comparison(NamedTuple):
    options: tuple[Option, ...]  # sorted by run cost, cheapest first
    configured: Option
    cheapest: Option | None  # the cheapest feasible option; None when nothing fits

    @property
    def saving_usd(self) -> float | None:
        """What the cheapest feasible option saves against the stack as configured (0 when it is that one)."""
        return None if self.cheapest is None else self.configured.run_usd - self.cheapest.run_usd

    def to_output(self) -> dict[str, Any]:
        """The summary the stack output `forecast` carries and the report prints."""
        best = self.cheapest
        return {
            "cheapest_feasible": None
            if best is None
            else {
                "gpu": best.gpu,
                "nodes": best.nodes,
                "gpus_per_node": best.gpus_per_node,
                "sharding": best.sharding,
                "hours": round(best.hours, 2),
                "run_cost_usd": round(best.run_usd, 2),
                "is_configured": best.configured,
            },
            "configured_run_cost_usd": round(self.configured.run_usd, 2),
            "saving_usd": None if self.saving_usd is None else round(self.saving_usd, 2),
            "candidates": len(self.options),
        }


def rented_gpus(topology: str) -> list[GpuSpec]:
    """GPU types RunPod rents in `topology`: Instant Cluster types for a cluster, every type for pods."""
    return [g for g in GPUS.values() if topology == "pods" or g.instant_cluster]


def _shapes(config: StackConfig, gpu: GpuSpec) -> list[tuple[int, int]]:
    c = config.cluster
    if c.topology == "cluster":
        return [(n, gpu.gpus_per_node) for n in CLUSTER_NODES]
    return [(c.nodes, g) for g in gpu.allowed_counts]


def _choose(config: StackConfig, names: Sequence[str]) -> list[GpuSpec]:
    topology = config.cluster.topology
    rented = rented_gpus(topology)
    if not names:
        return rented
    keys = [g.key for g in rented]
    chosen = []
    for name in names:
        if name not in GPUS:
            raise CompareError(
                f"--compare {name}: no GPU type {name!r} in the GPU table (cluster.gpu_type); "
                f"choices: {', '.join(keys)}"
            )
        if GPUS[name] not in rented:
            raise CompareError(
                f"--compare {name}: RunPod rents no Instant Cluster of {name} (cluster.topology is "
                f"{topology!r}; facts/gpus.py says why); choices: {', '.join(keys)}"
            )
        chosen.append(GPUS[name])
    return chosen


def _option(
    config: StackConfig, base: ForecastInput, gpu: GpuSpec, nodes: int, per_node: int, mode: Sharding
) -> Option:
    c = config.cluster
    gpus = nodes * per_node
    pods = c.topology == "pods"
    w = base.workload._replace(sharding=mode)
    d = base.deployment._replace(
        gpu=hardware(gpu),
        gpus_per_job=per_node if pods else gpus,
        jobs=nodes if pods else 1,
        compute_usd_per_hour=gpus * gpu.price_per_gpu_hour,
        spot_compute_usd_per_hour=None,
    )
    mem = memory(w, d.gpu, d.gpus_per_job)
    hours = compute(w, d).hours
    money = cost(hours, d)
    configured = (gpu.key, nodes, per_node, mode) == (
        c.gpu_type,
        c.nodes,
        c.gpus_per_node,
        base.workload.sharding,
    )
    return Option(
        gpu=gpu.key,
        nodes=nodes,
        gpus_per_node=per_node,
        sharding=mode,
        verdict=mem.verdict,
        total_gb=mem.total,
        total_high_gb=mem.total_high,
        gpu_gb=mem.gpu_memory,
        hours=hours,
        usd_per_hour=money.usd_per_hour,
        run_usd=money.run_usd,
        configured=configured,
    )


def compare(config: StackConfig, gpu_names: Sequence[str] = ()) -> Comparison | None:
    """Every candidate for the stack's workload, cheapest run first; None without a model section.

    `gpu_names` narrows the GPU types (CompareError names the choices for one not rented)."""
    base = forecast_input(config)
    if base is None:
        return None
    c = config.cluster
    chosen = _choose(config, gpu_names)
    options = [
        _option(config, base, gpu, nodes, per_node, mode)
        for gpu in chosen
        for nodes, per_node in _shapes(config, gpu)
        for mode in SHARDING_ORDER
    ]
    configured = next((o for o in options if o.configured), None)
    if configured is None:  # the stack's own shape is outside the candidates (e.g. a GPU narrowed away)
        configured = _option(config, base, GPUS[c.gpu_type], c.nodes, c.gpus_per_node, base.workload.sharding)
    options.sort(key=lambda o: (o.run_usd, not o.configured))
    cheapest = next((o for o in options if o.feasible), None)
    return Comparison(options=tuple(options), configured=configured, cheapest=cheapest)


def stack_output(config: StackConfig) -> dict[str, Any] | None:
    """The stack output `forecast` (Forecast.to_output) with the comparison's summary under `compare`."""
    result = stack_forecast(config)
    if result is None:
        return None
    comparison = compare(config)
    out = result.to_output()
    out["compare"] = None if comparison is None else comparison.to_output()
    return out
