"""The stack's one hourly price and its one run cost: every cost figure a user sees is computed here.

`stack_price(config)` prices exactly what the providers' `check()` price for the resources the stack declares
(tests/components/test_price.py holds the two equal for every shipped stack): each node's GPUs at the price
snapshot (a spot or `auto` pod at the dearer of its bid and on-demand, as RunPod may bill either), every
node's container disk and the network volume at the storage rates, storage spread over the month
(`facts.money.burn_per_hour`). The config's spend-limit check, the forecast, the alert rules and the
component's `cost_per_hour` output all read it.

`run_cost(config)`: the forecast's run cost when the stack declares `training.model` (hours the model needs
x the price), otherwise the price x `training.max_run_hours` (the most the watchdog lets one run last);
`basis` says which, so a figure is never shown without what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.config import StackConfig
from facts.gpus import GPUS
from facts.money import SNAPSHOT, burn_per_hour


@dataclass(frozen=True)
class StackPrice:
    """USD. What the stack's resources cost while they exist."""

    compute_usd_per_hour: float  # every GPU; spot and auto at the dearer of bid and on-demand
    storage_usd_per_month: float  # network volume + every node's container disk
    spot_compute_usd_per_hour: float | None  # every GPU at the bid, for spot and auto; None on-demand

    @property
    def usd_per_hour(self) -> float:
        return round(burn_per_hour(self.compute_usd_per_hour, self.storage_usd_per_month), 2)


def stack_price(config: StackConfig) -> StackPrice:
    c = config.cluster
    gpu = GPUS[c.gpu_type]
    # Instant Clusters run in Secure Cloud only; pods in the cloud they ask for.
    cloud = "SECURE" if c.topology == "cluster" else c.cloud
    on_demand = SNAPSHOT.gpu_hourly(gpu.api_id, cloud)
    if on_demand is None:
        on_demand = gpu.price_per_gpu_hour
    spot = c.capacity != "on_demand" and c.bid_per_gpu is not None
    per_gpu = max(on_demand, c.bid_per_gpu or 0.0) if spot else on_demand
    gpus = c.nodes * c.gpus_per_node
    storage = SNAPSHOT.volume_monthly(c.volume_gb) + SNAPSHOT.container_disk_monthly(
        c.container_disk_gb * c.nodes
    )
    return StackPrice(
        compute_usd_per_hour=round(per_gpu * gpus, 4),
        storage_usd_per_month=round(storage, 4),
        spot_compute_usd_per_hour=round((c.bid_per_gpu or 0.0) * gpus, 4) if spot else None,
    )


Basis = Literal["forecast", "max_run_hours"]


@dataclass(frozen=True)
class RunCost:
    usd: float
    hours: float
    basis: Basis

    @property
    def label(self) -> str:
        if self.basis == "forecast":
            return f"forecast: {self.hours:,.1f} h of training"
        return f"$/h x max_run_hours ({self.hours:g} h; no training.model to forecast)"


def run_cost(config: StackConfig) -> RunCost:
    from forecast.stack import stack_forecast  # forecast imports this module's price

    fc = stack_forecast(config)
    if fc is not None:
        return RunCost(round(fc.cost.run_usd, 2), fc.compute.hours, "forecast")
    hours = config.training.max_run_hours
    return RunCost(round(stack_price(config).usd_per_hour * hours, 2), hours, "max_run_hours")
