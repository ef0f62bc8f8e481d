"""GPU capability table: what each RunPod GPU type can do, as data with the reason for every limit.

Read by the stack config validation (stackconfig/config.py, stackconfig/rules.py), the providers'
price fallback (through `facts.money`) and the policy pack, so that all say the same thing. Adding a
field: give it a default (the dataclass is keyword-only), so rows need not all change at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from facts import sources
from facts.money import SNAPSHOT


class SpotAvailability(StrEnum):
    """Whether RunPod still rents this GPU as interruptible (spot) capacity."""

    # Only through the deprecated GraphQL `podRentInterruptable` mutation, which RunPod said it is removing:
    # a request may be refused at any time, so `auto` falls back to on-demand.
    LEGACY = "legacy"
    # Never offered as spot.
    NONE = "none"


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """One GPU type as the stack sees it."""

    key: str  # name used in stack config (`trainstack:cluster.gpu_type`)
    api_id: str  # RunPod `gpuTypeId` (v2 uses long names; sources.OPENAPI_V2)
    gpus_per_node: int  # GPUs on one full node (board); Instant Clusters use full nodes
    allowed_counts: tuple[int, ...]  # GPU counts a single pod may ask for
    interconnect: str  # within a node, and between nodes when in an Instant Cluster
    instant_cluster: bool  # self-serve Instant Clusters offered for this type
    spot: SpotAvailability
    min_cuda_version: str  # sent as `gpu.minCudaVersion` so no pod lands on a too-old driver
    why: str  # why the limits above are what they are
    memory_gb: float  # GPU memory as the datasheet states it (decimal GB), what the forecast fits into
    peak_tflops_bf16: float  # dense (no sparsity) BF16 tensor-core peak per GPU
    peak_tflops_fp8: float | None  # dense FP8 tensor-core peak per GPU; None: the GPU has no FP8 tensor cores
    perf_source: str  # where memory_gb and the peaks come from
    memory_bandwidth_tbps: float = 3.35  # HBM bandwidth per GPU, TB/s (datasheet); the forecast's LoRA term

    @property
    def bf16_gemm_floor_tflops(self) -> float:
        """The straggler test's floor (train/node/verdicts.py): a share of the dense bf16 peak."""
        return round(self.peak_tflops_bf16 * STRAGGLER_FLOOR_SHARE, 1)

    def peak_tflops(self, precision: str) -> float | None:
        """Dense tensor-core peak for `precision` ("bf16", "fp8"); None when the GPU cannot run it."""
        return {"bf16": self.peak_tflops_bf16, "fp8": self.peak_tflops_fp8}.get(precision)

    @property
    def label(self) -> str:
        """Short human name for messages, e.g. "H100_SXM (NVIDIA H100 80GB HBM3)"."""
        return f"{self.key} ({self.api_id})"

    @property
    def price_per_gpu_hour(self) -> float:
        """USD, secure cloud on-demand, from the dated snapshot: the offline fallback for the live catalog."""
        price = SNAPSHOT.gpu_hourly(self.api_id, "SECURE")
        if price is None:
            raise KeyError(f"no snapshot price for {self.api_id!r}; add it to facts.money.SNAPSHOT")
        return price

    @property
    def price_source(self) -> str:
        return SNAPSHOT.source


# The straggler test's floor as a share of the datasheet's dense bf16 peak. A healthy Hopper GPU's 8192^3 bf16
# GEMM reaches 65-80% of it (658-675 of 989 TFLOPS on two H200s running it at once, docs/GPU-VALIDATION.md;
# 769-798 on one alone; on one H100 80GB SXM the gate's own 3 s test 679.8-683.2 over 8 runs, 658.4-698.5 in
# groups of ten products, at its 700 W limit: the H100 floor 494.7 is 0.75 of the least, issue #69); a GPU
# under half is broken, not merely slow. Slower-than-peers GPUs are caught by
# the node-median rule (training.straggler_tolerance_pct), not by this floor.
STRAGGLER_FLOOR_SHARE: Final = 0.5

# NVIDIA's datasheet lists tensor-core peaks "with sparsity" (2:4 structured sparsity doubles them); dense
# training runs at half of each listed figure, which is what the table keeps.
_H100_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h100/), {form} column: "
    "{mem} GB, BF16 {bf16} and FP8 {fp8} TFLOPS with sparsity, halved for dense"
)

_H200_DATASHEET = (
    "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/), H200 SXM "
    "column: 141 GB HBM3e at 4.8 TB/s, BF16 1,979 and FP8 3,958 TFLOPS with sparsity, halved for dense"
)
_B200_DATASHEET = (
    "NVIDIA HGX B200 specifications (https://www.nvidia.com/en-us/data-center/hgx/), 8-GPU board: 1.4 TB "
    "HBM3e (RunPod lists 180 GB a GPU: https://docs.runpod.io/references/gpu-types) at 64 TB/s, FP16/BF16 36 "
    "and FP8 72 PFLOPS with sparsity; per GPU and halved for dense: BF16 2,250, FP8 4,500 TFLOPS, 8 TB/s"
)
# RunPod's pricing page lists Instant Cluster rates for H100 SXM, H200 and B200 (transcribed 2026-10-07 from
# https://www.runpod.io/pricing); FACTS.md's documented self-serve sizes are for H100: the same 2-8 nodes of 8
# are assumed for the other two (an inference to verify before renting).
_CLUSTER_WHY = (
    "SXM boards hold 8 GPUs on one NVSwitch; self-serve Instant Clusters are 2-8 such nodes "
    f"(16-64 GPUs) in one data center ({sources.INSTANT_CLUSTERS})"
)

_SPOT_WHY = (
    "spot exists only through the deprecated GraphQL podRentInterruptable mutation that RunPod is removing "
    f"(spot was dropped from {sources.PRICING} on 2026-05-06); REST v2 has no spot field "
    f"({sources.OPENAPI_V2})"
)

GPUS: Final[dict[str, GpuSpec]] = {
    spec.key: spec
    for spec in (
        GpuSpec(
            key="H100_SXM",
            api_id="NVIDIA H100 80GB HBM3",
            gpus_per_node=8,
            allowed_counts=(1, 2, 4, 8),
            interconnect="NVLink 4 via NVSwitch in a node; 3200 Gbps fabric (ens1-ens8) in Instant Clusters",
            instant_cluster=True,
            spot=SpotAvailability.LEGACY,
            min_cuda_version="12.4",
            why=f"{_CLUSTER_WHY}; {_SPOT_WHY}",
            memory_gb=80,
            peak_tflops_bf16=989.4,
            peak_tflops_fp8=1979.0,
            perf_source=_H100_DATASHEET.format(form="H100 SXM", mem=80, bf16="1,979", fp8="3,958")
            + "; 3.35 TB/s",
            memory_bandwidth_tbps=3.35,
        ),
        GpuSpec(
            key="H100_PCIE",
            api_id="NVIDIA H100 PCIe",
            gpus_per_node=8,
            allowed_counts=(1, 2, 4, 8),
            interconnect="PCIe 5 (optional NVLink bridges between pairs); no cluster fabric",
            instant_cluster=False,
            spot=SpotAvailability.LEGACY,
            min_cuda_version="12.4",
            why=(
                "PCIe cards have no NVSwitch, and Instant Clusters are documented for SXM parts only "
                f"(an inference to verify): use single-node pods; {_SPOT_WHY}"
            ),
            memory_gb=80,
            peak_tflops_bf16=756.0,
            peak_tflops_fp8=1513.0,
            perf_source=_H100_DATASHEET.format(form="H100 PCIe", mem=80, bf16="1,513", fp8="3,026")
            + "; 2 TB/s",
            memory_bandwidth_tbps=2.0,
        ),
        GpuSpec(
            key="H100_NVL",
            api_id="NVIDIA H100 NVL",
            gpus_per_node=8,
            allowed_counts=(1, 2, 4, 8),
            interconnect="NVLink bridges between card pairs; PCIe otherwise; no cluster fabric",
            instant_cluster=False,
            spot=SpotAvailability.LEGACY,
            min_cuda_version="12.4",
            why=(
                "NVL cards are bridged in pairs only, and Instant Clusters are documented for SXM parts only "
                f"(an inference to verify): use single-node pods; {_SPOT_WHY}"
            ),
            memory_gb=94,
            peak_tflops_bf16=835.5,
            peak_tflops_fp8=1670.5,
            perf_source=_H100_DATASHEET.format(form="H100 NVL", mem=94, bf16="1,671", fp8="3,341")
            + "; 3.9 TB/s",
            memory_bandwidth_tbps=3.9,
        ),
        GpuSpec(
            key="H200_SXM",
            api_id="NVIDIA H200",
            gpus_per_node=8,
            allowed_counts=(1, 2, 4, 8),
            interconnect="NVLink 4 via NVSwitch in a node; cluster fabric in Instant Clusters",
            instant_cluster=True,
            spot=SpotAvailability.LEGACY,
            min_cuda_version="12.4",
            why=f"{_CLUSTER_WHY} (H200: rates on https://www.runpod.io/pricing, sizes inferred); {_SPOT_WHY}",
            memory_gb=141,
            peak_tflops_bf16=989.4,
            peak_tflops_fp8=1979.0,
            perf_source=_H200_DATASHEET,
            memory_bandwidth_tbps=4.8,
        ),
        GpuSpec(
            key="B200",
            api_id="NVIDIA B200",
            gpus_per_node=8,
            allowed_counts=(1, 2, 4, 8),
            interconnect="NVLink 5 via NVSwitch in a node; cluster fabric in Instant Clusters",
            instant_cluster=True,
            spot=SpotAvailability.LEGACY,
            min_cuda_version="12.8",
            why=(
                f"{_CLUSTER_WHY} (B200: rates on https://www.runpod.io/pricing, sizes inferred); Blackwell "
                f"needs CUDA 12.8 or newer; {_SPOT_WHY}"
            ),
            memory_gb=180,
            peak_tflops_bf16=2250.0,
            peak_tflops_fp8=4500.0,
            perf_source=_B200_DATASHEET,
            memory_bandwidth_tbps=8.0,
        ),
    )
}

GPU_KEYS_BY_API_ID: Final = {spec.api_id: spec.key for spec in GPUS.values()}


def gpu_spec(key: str) -> GpuSpec:
    """The table row for `key`; KeyError names the known keys."""
    try:
        return GPUS[key]
    except KeyError:
        raise KeyError(f"unknown GPU type {key!r}; known: {', '.join(sorted(GPUS))}") from None
