"""What a stack costs per hour at the price snapshot: the one home of the figures the rules, the forecast,
the alerts, the report and `scripts/watch` read, in the providers' own terms.

`stack_price(config).usd_per_hour` is the stack's one hourly price, the figure every user-facing cost shows:
compute plus all storage per hour (`burn_per_hour`), what the component's `cost_per_hour` output, the
spend-limit check and the alert rules use. The parts below it stay apart for the policy pack and the forecast.

The providers price each resource in `check()` from the live catalog, or the dated snapshot
(`facts.money.SNAPSHOT`) without one; the figures here are the snapshot's Secure Cloud prices, so a preview
without an API key and the config's checks agree (tests/stackconfig/test_pricing.py holds them equal for
every shipped stack). Compute (`cost_per_hour` in the resource contract) and storage
(`storage_cost_per_month`) stay apart, as the providers report them:

- `compute_per_hour`: every GPU at `gpu_hour_price` (on-demand; spot and auto: the dearer of bid and
  on-demand), the sum of the pods' or the cluster's `cost_per_hour`;
- `on_demand_compute_per_hour`, `spot_compute_per_hour`: every GPU at on-demand, at the bid (the forecast's
  two prices; the budget alert's price is the on-demand one);
- `storage_per_month`: the network volume and the container disks, the resources' `storage_cost_per_month`;
- `cost_per_hour`: compute plus the network volume per hour, what the account's spend limit is checked
  against (the budget rule, the spend-limit notice, `ops.local_account`);
- `burn_per_hour`: compute plus all storage per hour, the whole bill as the policy pack counts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from facts import money
from facts.gpus import GPUS
from facts.money import HOURS_PER_MONTH, SNAPSHOT

if TYPE_CHECKING:
    from stackconfig.config import StackConfig


def _gpus(config: StackConfig) -> int:
    return config.cluster.nodes * config.cluster.gpus_per_node


def on_demand_gpu_hour_price(config: StackConfig) -> float:
    """USD per GPU-hour on-demand at the snapshot, in the cloud the stack rents in (Instant Clusters are
    Secure Cloud only; pods the cloud they ask for), the GPU table's price where the snapshot has none."""
    c = config.cluster
    gpu = GPUS[c.gpu_type]
    cloud = "SECURE" if c.topology == "cluster" else c.cloud
    price = SNAPSHOT.gpu_hourly(gpu.api_id, cloud)
    return gpu.price_per_gpu_hour if price is None else price


def gpu_hour_price(config: StackConfig) -> float:
    """USD per GPU-hour the budget counts: on-demand, or for spot and `auto` the dearer of the bid and
    on-demand (`auto` may fall back to on-demand, and a spot pod is billed its bid)."""
    c = config.cluster
    on_demand = on_demand_gpu_hour_price(config)
    return max(on_demand, c.bid_per_gpu or 0.0) if c.capacity != "on_demand" else on_demand


def compute_per_hour(config: StackConfig) -> float:
    """USD/h of every GPU at `gpu_hour_price`."""
    return _gpus(config) * gpu_hour_price(config)


def on_demand_compute_per_hour(config: StackConfig) -> float:
    """USD/h of every GPU at the on-demand price, whatever the capacity."""
    return _gpus(config) * on_demand_gpu_hour_price(config)


def spot_compute_per_hour(config: StackConfig) -> float | None:
    """USD/h of every GPU at the spot bid; None for on-demand capacity or without a bid."""
    c = config.cluster
    if c.capacity not in ("spot", "auto") or c.bid_per_gpu is None:
        return None
    return _gpus(config) * c.bid_per_gpu


def volume_per_month(config: StackConfig) -> float:
    """USD/month of the network volume (0 without one)."""
    return SNAPSHOT.volume_monthly(config.cluster.volume_gb)


def container_disk_per_month(config: StackConfig) -> float:
    """USD/month of every node's container disk."""
    return SNAPSHOT.container_disk_monthly(config.cluster.container_disk_gb * config.cluster.nodes)


def storage_per_month(config: StackConfig) -> float:
    """USD/month of all storage: the volume and the container disks."""
    return volume_per_month(config) + container_disk_per_month(config)


def cost_per_hour(config: StackConfig) -> float:
    """USD/h the stack costs against the account's spend limit: the one hourly price."""
    return stack_price(config).usd_per_hour


def burn_per_hour(config: StackConfig) -> float:
    """USD/h of the whole bill: compute plus every storage cost, per hour."""
    return compute_per_hour(config) + storage_per_month(config) / HOURS_PER_MONTH


@dataclass(frozen=True)
class StackPrice:
    """USD. What the stack's resources cost while they exist."""

    compute_usd_per_hour: float  # every GPU; spot and auto at the dearer of bid and on-demand
    storage_usd_per_month: float  # network volume + every node's container disk
    spot_compute_usd_per_hour: float | None  # every GPU at the bid, for spot and auto; None on-demand

    @property
    def usd_per_hour(self) -> float:
        """The stack's one hourly price: compute plus all storage spread over the month."""
        return round(money.burn_per_hour(self.compute_usd_per_hour, self.storage_usd_per_month), 2)


def stack_price(config: StackConfig) -> StackPrice:
    """The stack's price, from the parts above (what the providers' check() price)."""
    return StackPrice(
        compute_usd_per_hour=round(compute_per_hour(config), 4),
        storage_usd_per_month=round(storage_per_month(config), 4),
        spot_compute_usd_per_hour=None if (spot := spot_compute_per_hour(config)) is None else round(spot, 4),
    )
