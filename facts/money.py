"""What RunPod charges: hours per month, the dated price snapshot, storage rates, the default spend limit.

Prices change monthly: the providers read `GET /v2/catalog/gpus` at plan time and fall back to this
snapshot only when the catalog cannot be read (`sources.PRICING`). The config's budget estimate and the
report use the same figures, so a message and a bill agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from facts import sources

# RunPod bills storage per month and charges it by the hour; 730 h is the month RunPod and AWS divide by.
HOURS_PER_MONTH: Final = 730.0

# A new account may spend $80/h across all resources until support raises it (`sources.PRICING`,
# "Account spend limits"). 64 x H100 SXM is ~$255/h: above it.
DEFAULT_SPEND_LIMIT_PER_HOUR: Final = 80.0


@dataclass(frozen=True, kw_only=True)
class GpuPrice:
    """USD per GPU-hour of one GPU type, on-demand."""

    secure: float
    community: float


@dataclass(frozen=True, kw_only=True)
class StorageRates:
    """USD per GB-month (`sources.BILLING`)."""

    volume_first_tb: float  # network volume, the first 1000 GB (billed even with no pod attached)
    volume_beyond: float  # network volume beyond 1000 GB
    container_disk: float  # container disk (and volume disk) of a running pod
    # Volume disk (a pod's persistent /workspace) of a stopped pod; its container disk is wiped at the stop
    # and bills nothing (docs.runpod.io/pods/storage: "$0.10/GB/month (running), $0.20/GB/month (stopped)").
    volume_disk_stopped: float = 0.20
    first_tb_gb: int = 1000  # RunPod sizes volumes in decimal GB: "first TB" is the first 1000 GB


@dataclass(frozen=True, kw_only=True)
class PriceSnapshot:
    """List prices observed on one date: the offline fallback for the live catalog."""

    date: str
    source: str
    gpus: dict[str, GpuPrice]  # by RunPod gpuTypeId
    storage: StorageRates

    def gpu_hourly(self, gpu_type_id: str, cloud: str) -> float | None:
        price = self.gpus.get(gpu_type_id)
        if price is None:
            return None
        return price.secure if cloud == "SECURE" else price.community

    def volume_monthly(self, size_gb: int) -> float:
        """A network volume's monthly bill: the first TB at one rate, the rest at the other."""
        rates = self.storage
        first = min(size_gb, rates.first_tb_gb)
        return round(first * rates.volume_first_tb + (size_gb - first) * rates.volume_beyond, 4)

    def container_disk_monthly(self, gb: int) -> float:
        return round(gb * self.storage.container_disk, 4)

    def stopped_disk_monthly(self, volume_disk_gb: int) -> float:
        """A stopped pod's monthly bill: its volume disk at the stopped rate, nothing for the container."""
        return round(volume_disk_gb * self.storage.volume_disk_stopped, 4)


SNAPSHOT: Final = PriceSnapshot(
    date="2026-11-09",
    source=f"RunPod list prices observed 2026-11-09 ({sources.PRICING}); offline fallback only",
    gpus={
        "NVIDIA H100 80GB HBM3": GpuPrice(secure=3.99, community=2.69),
        "NVIDIA H100 PCIe": GpuPrice(secure=2.89, community=1.99),
        "NVIDIA H100 NVL": GpuPrice(secure=3.19, community=2.59),
        # Not in the 2026-11-09 observation: RunPod's pricing page as transcribed on 2026-10-07
        # (https://www.runpod.io/pricing, "Pods - H200 $4.59/hr", "Pods - B200 $6.79/hr"); no community rate
        # was listed, so community is the secure rate.
        "NVIDIA H200": GpuPrice(secure=4.59, community=4.59),
        "NVIDIA B200": GpuPrice(secure=6.79, community=6.79),
    },
    storage=StorageRates(volume_first_tb=0.07, volume_beyond=0.05, container_disk=0.10),
)


def burn_per_hour(cost_per_hour: float, storage_cost_per_month: float) -> float:
    """What a resource costs each hour it exists: compute plus storage spread over the month."""
    return cost_per_hour + storage_cost_per_month / HOURS_PER_MONTH
