"""The H100Cluster component's outputs as typed records (docs/ARCHITECTURE.md, "Resource contract").

The component builds `nodes`, `billed_ids` and `forecast` with `to_output()`; every reader (the policy pack,
the preview report, scripts/watch, the supervisor) parses them back with `from_output()`, which checks each
key and names the one that is missing or malformed. The stack exports `nodes` as is and the two billed ids
at its top level (`cluster_id`, `volume_id`), so `BilledIds.from_output` reads either map.
Standard library only: the ground layer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from common.errors import TrainstackError

__all__ = [
    "MEMORY_PARTS",
    "BilledIds",
    "ContractError",
    "ForecastMemory",
    "ForecastOutput",
    "NodeOutput",
    "SshEndpoint",
    "forecast_of",
    "nodes_of",
]


class ContractError(TrainstackError, ValueError):
    """A component output does not have the shape of its record; the message names the key."""


def _need(raw: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ContractError(
            f"{where} is not a map (got {type(raw).__name__}); run `scripts/up` to refresh it"
        )
    if key not in raw or raw[key] is None:
        raise ContractError(
            f"{where} has no `{key}`; the stack's outputs are older or broken: run `scripts/up`"
        )
    return raw[key]


def _int(value: Any, key: str, where: str) -> int:
    # Pulumi hands numbers over as floats (3 -> 3.0); a bool is not a number here.
    if isinstance(value, bool) or not isinstance(value, int | float) or float(value) != int(value):
        raise ContractError(f"{where}.{key} is not a whole number (got {value!r})")
    return int(value)


def _float(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ContractError(f"{where}.{key} is not a finite number (got {value!r})")
    return float(value)


def _opt_float(raw: Mapping[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    return None if value is None else _float(value, key, where)


def _str(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ContractError(f"{where}.{key} is not a non-empty string (got {value!r})")
    return value


@dataclass(frozen=True)
class SshEndpoint:
    """Where `ssh -p <port> root@<host>` reaches a node; written `host:port` in the `nodes` output."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: Any, where: str = "ssh_endpoint") -> SshEndpoint:
        host, sep, port = str(text or "").rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ContractError(f"{where} is not `host:port` (got {text!r})")
        return cls(host, int(port))


@dataclass(frozen=True, kw_only=True)
class NodeOutput:
    """One node as the `nodes` output lists it, in rank order (a pool's ended trial leaves a gap)."""

    rank: int  # 0 = primary (Instant Cluster rank) or the pod's index in the pool
    ip: str  # fabric IP (cluster) or private IP (pods)
    pod_id: str  # RunPod pod id
    ssh: SshEndpoint
    boot: int = 0  # the pod's starts after a declared stop; part of the run id (written only when > 0)

    def to_output(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "ip": self.ip,
            "pod_id": self.pod_id,
            "ssh_endpoint": str(self.ssh),
        }
        return out | ({"boot": self.boot} if self.boot else {})

    @classmethod
    def from_output(cls, raw: Mapping[str, Any], where: str = "node") -> NodeOutput:
        boot = raw.get("boot") if isinstance(raw, Mapping) else None
        return cls(
            rank=_int(_need(raw, "rank", where), "rank", where),
            ip=_str(_need(raw, "ip", where), "ip", where),
            pod_id=_str(_need(raw, "pod_id", where), "pod_id", where),
            ssh=SshEndpoint.parse(_need(raw, "ssh_endpoint", where), f"{where}.ssh_endpoint"),
            boot=0 if boot is None else _int(boot, "boot", where),
        )


def nodes_of(outputs: Mapping[str, Any]) -> list[NodeOutput]:
    """The `nodes` of a stack's (or the component's) outputs; none when the stack declares no compute."""
    raw = outputs.get("nodes")
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ContractError(f"outputs.nodes is not a list (got {type(raw).__name__}); run `scripts/up`")
    return [NodeOutput.from_output(n, f"nodes[{i}]") for i, n in enumerate(raw)]


@dataclass(frozen=True, kw_only=True)
class BilledIds:
    """What RunPod bills under its own id: the Instant Cluster and the network volume (None: the stack has
    none). Loose pods bill under their own ids, which `nodes` lists."""

    cluster_id: str | None
    volume_id: str | None

    def to_output(self) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id, "volume_id": self.volume_id}

    @classmethod
    def from_output(cls, raw: Mapping[str, Any], where: str = "billed_ids") -> BilledIds:
        """Both keys must be there (a None value is "none"): the stack outputs and `billed_ids` alike."""
        if not isinstance(raw, Mapping):
            raise ContractError(f"{where} is not a map (got {type(raw).__name__})")

        def one(key: str) -> str | None:
            if key not in raw:
                raise ContractError(
                    f"{where} has no `{key}`; run `scripts/up` to refresh the stack's outputs"
                )
            value = raw[key]
            return None if value in (None, "") else _str(value, key, where)

        return cls(cluster_id=one("cluster_id"), volume_id=one("volume_id"))


# The parts of the per-GPU total, in the order a breakdown lists them.
MEMORY_PARTS: Final = ("weights", "gradients", "optimizer", "activations", "gather_buffers", "allowance")


@dataclass(frozen=True, kw_only=True)
class ForecastMemory:
    """GB per GPU by part (`memory_gb_per_gpu`); the band (`total_low`, `total_high`) is None in a forecast
    recorded before it existed."""

    parts: Mapping[str, float]  # weights, gradients, optimizer, activations, gather_buffers, allowance
    total: float
    total_low: float | None
    total_high: float | None
    gpu: float  # the GPU's memory
    headroom: float

    def to_output(self) -> dict[str, Any]:
        band = {"total_low": self.total_low, "total_high": self.total_high}
        return {
            **self.parts,
            "total": self.total,
            **{k: v for k, v in band.items() if v is not None},
            "gpu": self.gpu,
            "headroom": self.headroom,
        }

    @classmethod
    def from_output(cls, raw: Mapping[str, Any], where: str = "forecast.memory_gb_per_gpu") -> ForecastMemory:
        def need(key: str) -> float:
            return _float(_need(raw, key, where), key, where)

        return cls(
            parts={k: need(k) for k in MEMORY_PARTS if k in raw},
            total=need("total"),
            total_low=_opt_float(raw, "total_low", where),
            total_high=_opt_float(raw, "total_high", where),
            gpu=need("gpu"),
            headroom=need("headroom"),
        )


@dataclass(frozen=True, kw_only=True)
class ForecastOutput:
    """The training run's forecast (forecast.model.Forecast.to_output, with forecast.compare's summary under
    `compare`): known at preview, from the stack config alone; the component outputs None without a model."""

    gpu: str  # facts.gpus name, e.g. H100_SXM
    gpus_per_job: int
    jobs: int
    memory: ForecastMemory  # `memory_gb_per_gpu`
    fits: bool
    verdict: str | None  # "fits" / "may not fit" / "does not fit"; None in a forecast from before the band
    fixes: tuple[str, ...]
    flops: float
    mfu: float
    hours: float
    max_run_hours: float
    restarts: int
    usd_per_hour: float
    run_cost_usd: float
    spot_run_cost_usd: float | None
    compare: Mapping[str, Any] | None = None  # forecast.compare's summary; None: no comparison ran
    # what the forecast assumed rather than was given or measured (kv heads, FFN width, fp8's share), as words
    assumed: tuple[str, ...] = ()

    def to_output(self) -> dict[str, Any]:
        out = {
            "gpu": self.gpu,
            "gpus_per_job": self.gpus_per_job,
            "jobs": self.jobs,
            "memory_gb_per_gpu": self.memory.to_output(),
            "fits": self.fits,
            "verdict": self.verdict,
            "fixes": list(self.fixes),
            "flops": self.flops,
            "mfu": self.mfu,
            "hours": self.hours,
            "max_run_hours": self.max_run_hours,
            "restarts": self.restarts,
            "usd_per_hour": self.usd_per_hour,
            "run_cost_usd": self.run_cost_usd,
            "spot_run_cost_usd": self.spot_run_cost_usd,
            "assumed": list(self.assumed),
        }
        return out | {"compare": None if self.compare is None else dict(self.compare)}

    @classmethod
    def from_output(cls, raw: Mapping[str, Any], where: str = "forecast") -> ForecastOutput:
        def num(key: str) -> float:
            return _float(_need(raw, key, where), key, where)

        def whole(key: str) -> int:
            return _int(_need(raw, key, where), key, where)

        fits = _need(raw, "fits", where)
        if not isinstance(fits, bool):
            raise ContractError(f"{where}.fits is not true or false (got {fits!r})")
        fixes = raw.get("fixes") or []
        assumed = raw.get("assumed") or []  # absent in a forecast written before it was recorded
        compare = raw.get("compare")
        verdict = raw.get("verdict")
        memory = _need(raw, "memory_gb_per_gpu", where)
        return cls(
            gpu=_str(_need(raw, "gpu", where), "gpu", where),
            gpus_per_job=whole("gpus_per_job"),
            jobs=whole("jobs"),
            memory=ForecastMemory.from_output(memory, f"{where}.memory_gb_per_gpu"),
            fits=fits,
            verdict=None if verdict is None else _str(verdict, "verdict", where),
            fixes=tuple(str(f) for f in fixes),
            flops=num("flops"),
            mfu=num("mfu"),
            hours=num("hours"),
            max_run_hours=num("max_run_hours"),
            restarts=whole("restarts"),
            usd_per_hour=num("usd_per_hour"),
            run_cost_usd=num("run_cost_usd"),
            spot_run_cost_usd=_opt_float(raw, "spot_run_cost_usd", where),
            compare=compare if isinstance(compare, Mapping) else None,
            assumed=tuple(str(a) for a in assumed),
        )


def forecast_of(outputs: Mapping[str, Any]) -> ForecastOutput | None:
    """The `forecast` of a stack's (or the component's) outputs; None when the stack declares no model."""
    raw = outputs.get("forecast")
    return None if raw is None else ForecastOutput.from_output(raw)
