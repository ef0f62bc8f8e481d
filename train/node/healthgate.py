"""The GPU health gate: pure checks of NVML readings, each failure one line naming the GPU and the fix.

    python -m train.node.healthgate --record R.json --expected-gpus 8 --replace pod [--device cpu]

Checks per GPU (readings from train/node/nvml.py): volatile uncorrected ECC errors, pending or failed row
remaps, XID events, PCIe link width (and generation, under load only: an idle link drops its generation to
save power), NVLink links down (against the GPU's own links and its peers'), throttle reasons that mean a
sick or hot GPU, and temperature against the GPU's own slowdown threshold. Exit 0 when healthy (or no GPU on a
CPU test cluster), 1 with the first failure as the last line of stderr otherwise; the record gets every
finding either way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from train.node import healthrecord, hostid
from train.node.nvml import (
    BAD_THROTTLE_REASONS,
    GpuReading,
    NvmlSampler,
    Recording,
    ReplaySampler,
    Sampler,
    SamplerError,
    throttle_names,
)

# At start-up the GPUs are idle: one this close to its slowdown threshold has a cooling problem.
IDLE_TEMP_MARGIN_C = 10
FALLBACK_SLOWDOWN_C = 90  # when NVML gives no threshold (H100 SXM reads 90 or more; see the recording)
ACTIONS = {
    "pod": "replace this pod (pulumi up after removing it)",
    "cluster": "replace the cluster (a node of an Instant Cluster cannot be swapped alone)",
}


@dataclass(frozen=True)
class Finding:
    """One failed check."""

    gpu: int | None  # None: about the node (GPU count)
    check: str  # ecc | row_remap | xid | pcie | nvlink | throttle | temperature | count
    reason: str  # what is wrong, one line, no fix

    def line(self, readings: Sequence[GpuReading], replace: str) -> str:
        where = "node"
        if self.gpu is not None:
            bus = next((r.pci_bus_id for r in readings if r.index == self.gpu), "?")
            where = f"GPU {self.gpu} ({bus})"
        return f"{where}: {self.reason}; {ACTIONS[replace]}"

    def to_json(self) -> dict[str, object]:
        return {"gpu": self.gpu, "check": self.check, "reason": self.reason}


def check_gpu(r: GpuReading, *, under_load: bool) -> list[Finding]:
    """Every check of one GPU on its own readings."""
    out: list[Finding] = []

    def bad(check: str, reason: str) -> None:
        out.append(Finding(r.index, check, reason))

    if r.ecc_uncorrected_volatile:
        bad("ecc", f"{r.ecc_uncorrected_volatile} volatile uncorrected ECC error(s) since the driver loaded")
    if r.remap_failed:
        bad("row_remap", "a memory row remap failed: the GPU can no longer repair its memory")
    if r.remap_pending:
        bad("row_remap", "a memory row remap is pending: it takes effect only after a GPU reset")
    if r.xid_events:
        bad("xid", f"XID error(s) {', '.join(str(x) for x in r.xid_events)} reported by the driver")
    if r.pcie_width is not None and r.pcie_width_max is not None and r.pcie_width < r.pcie_width_max:
        bad("pcie", f"PCIe link trained at x{r.pcie_width}, the GPU supports x{r.pcie_width_max}")
    if under_load and r.pcie_gen is not None and r.pcie_gen_max is not None and r.pcie_gen < r.pcie_gen_max:
        bad("pcie", f"PCIe link at gen {r.pcie_gen} under load, the GPU supports gen {r.pcie_gen_max}")
    if r.nvlink_up and any(r.nvlink_up) and not all(r.nvlink_up):
        down = [i for i, up in enumerate(r.nvlink_up) if not up]
        bad("nvlink", f"NVLink link(s) {down} down ({sum(r.nvlink_up)} of {len(r.nvlink_up)} up)")
    hot = [n for n in throttle_names(r.throttle_mask or 0) if n in BAD_THROTTLE_REASONS]
    if hot:
        bad("throttle", f"clocks held down by {', '.join(hot)}")
    if r.temperature_c is not None:
        slowdown = r.slowdown_temp_c or FALLBACK_SLOWDOWN_C
        limit = slowdown if under_load else slowdown - IDLE_TEMP_MARGIN_C
        if r.temperature_c >= limit:
            state = "under load" if under_load else "idle"
            bad("temperature", f"{r.temperature_c} °C {state}, limit {limit} °C (slowdown at {slowdown} °C)")
    return out


def check_node(
    readings: Sequence[GpuReading], expected_gpus: int, *, under_load: bool = False
) -> list[Finding]:
    """Every finding for the node: the count, each GPU, and NVLink against the node's best GPU."""
    out: list[Finding] = []
    if len(readings) != expected_gpus:
        out.append(
            Finding(None, "count", f"NVML sees {len(readings)} GPU(s), the stack expects {expected_gpus}")
        )
    for r in readings:
        out += check_gpu(r, under_load=under_load)
    # A GPU whose links all read down while its peers' are up: the per-GPU check cannot see that.
    most = max((sum(r.nvlink_up) for r in readings if r.nvlink_up), default=0)
    for r in readings:
        up = sum(r.nvlink_up) if r.nvlink_up else 0
        if most and up == 0:
            out.append(Finding(r.index, "nvlink", f"no NVLink link up, its peers have {most}"))
    return out


def visible(readings: Sequence[GpuReading], cuda_visible_devices: str | None) -> list[GpuReading]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves to the job (all when it is unset). NVML, like nvidia-smi, ignores
    that variable, so a node pinned to some of the host's GPUs (two nodes on one 2 x H200 host, each on its
    own GPU) would count them all. Entries are NVML indices or full UUIDs; empty means no GPU."""
    if cuda_visible_devices is None:
        return list(readings)
    wanted = [w.strip() for w in cuda_visible_devices.split(",") if w.strip()]
    return [r for r in readings if str(r.index) in wanted or r.uuid in wanted]


def run_gate(
    sampler: Sampler,
    expected_gpus: int,
    replace: str,
    *,
    under_load: bool = False,
    env: Mapping[str, str] = os.environ,
) -> tuple[dict[str, object], list[str]]:
    """Read once and check: (the record's `gate` section, failure lines — empty when healthy). Only the
    GPUs `env`'s CUDA_VISIBLE_DEVICES leaves count, for the idle gate and the under-load one alike."""
    readings = visible(sampler.read(), env.get("CUDA_VISIBLE_DEVICES"))
    findings = check_node(readings, expected_gpus, under_load=under_load)
    section: dict[str, object] = {
        "status": "fail" if findings else "pass",
        "under_load": under_load,
        "gpus": [r.to_json() for r in readings],
        "findings": [f.to_json() for f in findings],
    }
    return section, [f.line(readings, replace) for f in findings]


REPLAY_ENV = "TRAINSTACK_GATE_REPLAY"


def _sampler() -> Sampler:
    """NVML, or recorded readings when $TRAINSTACK_GATE_REPLAY names FILE[:SNAPSHOT] (a test hook)."""
    replay = os.environ.get(REPLAY_ENV, "")
    if not replay:
        return NvmlSampler()
    path, _, snap = replay.partition(":")
    return ReplaySampler([Recording.load(Path(path)).snapshots[snap or "idle"]])


def known_bad_host(
    section: Mapping[str, object], lines: list[str], replace: str, env: Mapping[str, str], s3: object = None
) -> list[str]:
    """The gate's lines with the host checked against the stack's failed hosts (train/node/hostid.py): a
    host that failed before is refused first; a host failing now on hardware is recorded for the next gate.
    Without a bucket (or boto3) there is nothing to read or write: the checks above stand alone."""
    bucket = env.get("TRAINSTACK_CHECKPOINT_BUCKET") or ""
    gpus = section.get("gpus")
    host = hostid.HostId.of(gpus if isinstance(gpus, list) else [])
    if not bucket or not host.gpu_uuids:
        return lines
    try:
        s3 = s3 or hostid.client()
        seen = hostid.failed_before(host, hostid.read_failed(s3, bucket))
        if seen is not None:
            return [hostid.refusal(host, seen, ACTIONS[replace]), *lines]
        if lines:
            hostid.mark_failed(s3, bucket, host, env.get("RUNPOD_POD_ID") or os.uname().nodename, lines[0])
    except Exception as exc:  # the bucket is a second opinion: the gate's own verdict never waits on it
        print(f"failed hosts not read or written: {type(exc).__name__}: {exc}", file=sys.stderr)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.node.healthgate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--record", type=Path, required=True, help="the node's health record (JSON)")
    parser.add_argument("--expected-gpus", type=int, required=True)
    parser.add_argument("--replace", choices=sorted(ACTIONS), default="pod")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    began = time.monotonic()

    def took() -> dict[str, float]:  # the check's time, summed into the goodput ledger's health time
        return {"elapsed_s": round(time.monotonic() - began, 3)}

    if args.device == "cpu":
        why = "no GPU: cpu test cluster, the GPU health gate does not apply"
        healthrecord.update(args.record, "gate", {"status": "skipped", "reason": why} | took())
        print(f"health gate skipped: {why}", file=sys.stderr)
        return 0
    try:
        sampler = _sampler()
    except SamplerError as exc:
        line = f"node: {exc}; {ACTIONS[args.replace]}"
        healthrecord.update(args.record, "gate", {"status": "fail", "reason": line} | took())
        print(line, file=sys.stderr)
        return 1
    try:
        section, lines = run_gate(sampler, args.expected_gpus, args.replace)
        section |= {
            "driver": getattr(sampler, "driver", None),
            "xid_watch": getattr(sampler, "xid_watch", None),
        }
    except SamplerError as exc:
        section, lines = {"status": "fail"}, [f"node: {exc}; {ACTIONS[args.replace]}"]
    finally:
        sampler.close()
    lines = known_bad_host(section, lines, args.replace, os.environ)
    if lines:
        section["status"] = "fail"
    healthrecord.update(args.record, "gate", section | {"reason": lines[0] if lines else None} | took())
    for line in lines:
        print(line, file=sys.stderr)
    if not lines:
        print(f"health gate: {args.expected_gpus} GPU(s) healthy", file=sys.stderr)
    # The start script stops on the first line it is given: the last line printed is the first failure.
    if lines:
        print(lines[0], file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
