"""GPU readings through NVML (nvidia-ml-py), behind one seam so tests replay recorded readings.

`Sampler.read()` is the only way the gate and the agent see a GPU. `NvmlSampler` reads the real driver;
`ReplaySampler` answers with readings recorded on a real machine (train/node/recordings/*.json, written by
`python -m train.node.record`). A field NVML does not support on a GPU is None, never a made-up value.

XIDs: NVML keeps no history of XID errors; it reports them as events to a process that registered for them.
`NvmlSampler` registers at start and `xid_events` lists the XIDs it has seen since (the agent's whole run;
the gate's own few seconds, after the straggler test put load on the GPUs). The kernel log would go further
back, but a container cannot read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# Clock event ("throttle") reason bits, from nvml.h (nvmlClocksEventReason*).
THROTTLE_REASONS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
# The reasons that mean a sick or badly cooled GPU; power capping under load and idling are normal.
BAD_THROTTLE_REASONS = (
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS
_FI_NVLINK_TX_KIB, _FI_NVLINK_RX_KIB = 138, 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX / _RX, in KiB


def throttle_names(mask: int) -> list[str]:
    """The named reasons set in a clock-event bitmask."""
    return [name for name, bit in THROTTLE_REASONS.items() if mask & bit]


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment; None = NVML does not report it on this GPU (or driver)."""

    index: int  # NVML index (what CUDA_VISIBLE_DEVICES and nvidia-smi use)
    name: str  # e.g. "NVIDIA H100 80GB HBM3"
    uuid: str
    pci_bus_id: str
    temperature_c: int | None
    slowdown_temp_c: int | None  # the GPU's own threshold where it starts to slow down
    ecc_uncorrected_volatile: int | None  # since the driver loaded; None when ECC is off
    ecc_corrected_volatile: int | None
    remapped_rows_uncorrectable: int | None  # rows remapped for uncorrectable errors (lifetime)
    remap_pending: bool | None  # a remap waits for a GPU reset: the memory is not yet fixed
    remap_failed: bool | None  # a remap failed: the GPU cannot fix its memory any more
    pcie_gen: int | None  # current link generation (drops at idle to save power: judged under load)
    pcie_gen_max: int | None  # the GPU's maximum generation
    pcie_width: int | None  # current lanes
    pcie_width_max: int | None
    nvlink_up: tuple[bool, ...] | None  # state of each link NVML reports; None: no NVLink
    throttle_mask: int | None  # nvmlClocksEventReason* bits
    utilization_pct: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_w: float | None
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    nvlink_tx_bytes: int | None  # cumulative data sent over all links
    nvlink_rx_bytes: int | None
    xid_events: tuple[int, ...] = ()  # XIDs seen since the sampler started (see the module docstring)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["nvlink_up"] = list(self.nvlink_up) if self.nvlink_up is not None else None
        out["xid_events"] = list(self.xid_events)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> GpuReading:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in obj.items() if k in known}
        if values.get("nvlink_up") is not None:
            values["nvlink_up"] = tuple(values["nvlink_up"])
        values["xid_events"] = tuple(values.get("xid_events") or ())
        return cls(**values)


class Sampler(Protocol):
    """The seam: everything that reads GPUs. `read` may raise SamplerError; it never returns partial GPUs."""

    def read(self) -> list[GpuReading]: ...

    def close(self) -> None: ...


class SamplerError(RuntimeError):
    """NVML is missing or failed; the message says which and what it means for this node."""


@dataclass
class ReplaySampler:
    """Answers with recorded readings, in order, repeating the last one (tests and dry runs)."""

    snapshots: Sequence[Sequence[GpuReading]]
    _next: int = field(default=0, init=False)

    def read(self) -> list[GpuReading]:
        snap = self.snapshots[min(self._next, len(self.snapshots) - 1)]
        self._next += 1
        return list(snap)

    def close(self) -> None:
        return None


@dataclass
class FileSampler:
    """Readings from a JSON file (a list of `GpuReading.to_json()` objects), read again whenever the file
    changes: an agent on a CPU host serves recorded GPUs, and a test injects a fault by rewriting the file."""

    path: Path
    _stamp: tuple[int, int] | None = field(default=None, init=False)
    _readings: list[GpuReading] = field(default_factory=list, init=False)

    def read(self) -> list[GpuReading]:
        try:
            st = self.path.stat()
            if (st.st_mtime_ns, st.st_size) != self._stamp:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                self._readings = [GpuReading.from_json(g) for g in raw]
                self._stamp = (st.st_mtime_ns, st.st_size)
        except (OSError, ValueError, TypeError) as exc:
            raise SamplerError(f"replay file {self.path}: {type(exc).__name__}") from None
        return list(self._readings)

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class Recording:
    """A file written by train/node/record.py: when, where, and what the GPUs read."""

    recorded_at: str  # ISO 8601 UTC
    machine: str  # e.g. "nvidia-h200-x2 (2 x NVIDIA H200, driver 580.159.04)"
    driver: str
    snapshots: dict[str, list[GpuReading]]  # "idle", "load", ... -> one reading per GPU

    @classmethod
    def load(cls, path: Path) -> Recording:
        obj = json.loads(path.read_text(encoding="utf-8"))
        snaps = {k: [GpuReading.from_json(g) for g in v] for k, v in obj["snapshots"].items()}
        return cls(obj["recorded_at"], obj["machine"], obj["driver"], snaps)

    def to_json(self) -> dict[str, Any]:
        return {
            "recorded_at": self.recorded_at,
            "machine": self.machine,
            "driver": self.driver,
            "snapshots": {k: [g.to_json() for g in v] for k, v in self.snapshots.items()},
        }


def with_fault(readings: Sequence[GpuReading], gpu: int, **change: Any) -> list[GpuReading]:
    """The same readings with one GPU's fields changed (how tests build fault cases from a recording)."""
    return [replace(r, **change) if r.index == gpu else r for r in readings]


class NvmlSampler:
    """Reads every GPU through NVML. Construction raises SamplerError when there is no usable NVML.

    What never changes while the driver runs (name, ids, limits) is read once. NVLink states and row-remap
    counts are read every `slow_every` reads (the agent: once a minute; the gate: every read), since NVML
    answers them slowly and they change rarely; between those reads the last values are repeated.
    """

    def __init__(self, slow_every: int = 1) -> None:
        try:
            import pynvml
        except ImportError as exc:  # the node image lacks requirements-node.txt
            raise SamplerError(
                f"nvidia-ml-py is not installed ({exc}); install requirements-node.txt"
            ) from None
        self._nv: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise SamplerError(f"NVML is not available ({exc}): no NVIDIA driver on this machine") from None
        self.driver = _text(pynvml.nvmlSystemGetDriverVersion())
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self._xids: dict[int, list[int]] = {i: [] for i in range(len(self._handles))}
        self._events: Any = None
        self.xid_watch = self._watch_xids()
        self._slow_every, self._reads = max(1, slow_every), 0
        self._static: dict[int, dict[str, Any]] = {}
        self._slow: dict[int, dict[str, Any]] = {}

    def _watch_xids(self) -> str:
        nv = self._nv
        try:
            self._events = nv.nvmlEventSetCreate()
            for h in self._handles:
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._events)
        except nv.NVMLError as exc:
            return f"XID events not available ({exc})"
        return "watching XID events"

    def _drain_xids(self) -> None:
        nv = self._nv
        if self._events is None:
            return
        by_handle = {_key(h): i for i, h in enumerate(self._handles)}
        for _ in range(1000):  # bounded: a flood of events must not stall a sample
            try:
                ev = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing pending
                return
            gpu = by_handle.get(_key(ev.device))
            if gpu is not None:
                self._xids[gpu].append(int(ev.eventData))

    def read(self) -> list[GpuReading]:
        try:
            self._drain_xids()
            if self._reads % self._slow_every == 0:
                self._slow = {i: self._slow_fields(h) for i, h in enumerate(self._handles)}
            self._reads += 1
            return [self._one(i, h) for i, h in enumerate(self._handles)]
        except self._nv.NVMLError as exc:
            raise SamplerError(f"NVML read failed ({exc})") from None

    def _static_fields(self, i: int, h: Any) -> dict[str, Any]:
        if i not in self._static:
            nv, opt = self._nv, self._opt
            self._static[i] = {
                "name": _text(nv.nvmlDeviceGetName(h)),
                "uuid": _text(nv.nvmlDeviceGetUUID(h)),
                "pci_bus_id": _text(nv.nvmlDeviceGetPciInfo(h).busId),
                "slowdown_temp_c": opt(
                    nv.nvmlDeviceGetTemperatureThreshold, h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
                ),
                "pcie_gen_max": opt(nv.nvmlDeviceGetGpuMaxPcieLinkGeneration, h),
                "pcie_width_max": opt(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                "sm_clock_max_mhz": opt(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            }
        return self._static[i]

    def _slow_fields(self, h: Any) -> dict[str, Any]:
        remap = self._opt(self._nv.nvmlDeviceGetRemappedRows, h)
        return {
            "nvlink_up": self._nvlinks(h),
            "remapped_rows_uncorrectable": int(remap[1]) if remap else None,
            "remap_pending": bool(remap[2]) if remap else None,
            "remap_failed": bool(remap[3]) if remap else None,
        }

    def _opt(self, fn: Callable[..., T], *args: Any) -> T | None:
        """A field NVML does not support here is None; any other NVML error propagates."""
        nv = self._nv
        try:
            return fn(*args)
        except (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound, nv.NVMLError_NoPermission):
            return None

    def _one(self, i: int, h: Any) -> GpuReading:
        nv, opt = self._nv, self._opt
        mem = opt(nv.nvmlDeviceGetMemoryInfo, h)
        util = opt(nv.nvmlDeviceGetUtilizationRates, h)
        power = opt(nv.nvmlDeviceGetPowerUsage, h)
        slow = self._slow[i]
        tx, rx = self._nvlink_bytes(h, slow["nvlink_up"])
        return GpuReading(
            index=i,
            **self._static_fields(i, h),
            **slow,
            temperature_c=opt(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            ecc_uncorrected_volatile=opt(
                nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
            ),
            ecc_corrected_volatile=opt(
                nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC
            ),
            pcie_gen=opt(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_width=opt(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            throttle_mask=opt(nv.nvmlDeviceGetCurrentClocksEventReasons, h),
            utilization_pct=int(util.gpu) if util is not None else None,
            memory_used_bytes=int(mem.used) if mem is not None else None,
            memory_total_bytes=int(mem.total) if mem is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            sm_clock_mhz=opt(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            nvlink_tx_bytes=tx,
            nvlink_rx_bytes=rx,
            xid_events=tuple(self._xids[i]),
        )

    def _nvlinks(self, h: Any) -> tuple[bool, ...] | None:
        nv = self._nv
        states = []
        for link in range(_NVLINK_MAX_LINKS):
            try:
                states.append(nv.nvmlDeviceGetNvLinkState(h, link) == nv.NVML_FEATURE_ENABLED)
            except nv.NVMLError:  # NotSupported / InvalidArgument: this link does not exist on this GPU
                continue
        return tuple(states) if states else None

    def _nvlink_bytes(self, h: Any, links: tuple[bool, ...] | None) -> tuple[int | None, int | None]:
        if not links:
            return None, None
        nv = self._nv
        ids = [(f, link) for f in (_FI_NVLINK_TX_KIB, _FI_NVLINK_RX_KIB) for link in range(len(links))]
        try:
            values = nv.nvmlDeviceGetFieldValues(h, ids)
        except nv.NVMLError:
            return None, None
        totals = [0, 0]
        for n, v in enumerate(values):
            if v.nvmlReturn != nv.NVML_SUCCESS:
                return None, None
            totals[n // len(links)] += int(v.value.ullVal) * 1024
        return totals[0], totals[1]

    def close(self) -> None:
        nv = self._nv
        try:
            if self._events is not None:
                nv.nvmlEventSetFree(self._events)
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass  # shutting down: nothing left to do with the error


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _key(handle: Any) -> int:
    """A comparable identity of an NVML device handle (a ctypes pointer)."""
    import ctypes

    return ctypes.cast(handle, ctypes.c_void_p).value or 0
