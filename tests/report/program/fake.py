"""Dynamic resources that keep trainstack's resource contract (type tokens, cost props) and call nothing."""

from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ResourceProvider, UpdateResult

GPU_HOURLY = 3.99  # USD per H100 SXM GPU-hour (Secure Cloud), the figure the stacks' comments use
VOLUME_GB_MONTH = 0.07
DISK_GB_MONTH = 0.10
REPLACE_KEYS = ("gpu_type_id", "data_center_id", "size_gb", "value", "name")


def _costs(kind: str, props: dict[str, Any]) -> dict[str, float]:
    if kind == "Pod":
        hourly = GPU_HOURLY * int(props.get("gpu_count", 0))
        return {
            "cost_per_hour": round(hourly, 4),
            "storage_cost_per_month": int(props.get("container_disk_gb", 0)) * DISK_GB_MONTH,
        }
    if kind == "InstantCluster":
        pods = int(props.get("pod_count", 0))
        hourly = GPU_HOURLY * int(props.get("gpu_count_per_pod", 0)) * pods
        disk = int(props.get("container_disk_gb", 0)) * pods * DISK_GB_MONTH
        return {"cost_per_hour": round(hourly, 4), "storage_cost_per_month": round(disk, 4)}
    if kind == "NetworkVolume":
        return {
            "cost_per_hour": 0.0,
            "storage_cost_per_month": round(int(props.get("size_gb", 0)) * VOLUME_GB_MONTH, 4),
        }
    return {"cost_per_hour": 0.0, "storage_cost_per_month": 0.0}


class FakeProvider(ResourceProvider):
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult({**news, **_costs(self.kind, news)}, [])

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = {k: v for k, v in props.items() if k != "value"}
        return CreateResult(
            id_=f"{self.kind.lower()}-{props.get('name', 'x')}", outs={**outs, "status": "RUNNING"}
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # The secret value is write-only (never in outputs), so this fake cannot see it change.
        skip = {"__provider", "status", "value"}
        keys = sorted(k for k in set(olds) | set(news) if k not in skip and olds.get(k) != news.get(k))
        return DiffResult(changes=bool(keys), replaces=[k for k in keys if k in REPLACE_KEYS])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**{k: v for k, v in news.items() if k != "value"}, "status": "RUNNING"})


class Pod(pulumi.dynamic.Resource, module="runpod", name="Pod"):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__(
            FakeProvider("Pod"),
            name,
            {**props, "cost_per_hour": None, "storage_cost_per_month": None, "status": None},
        )


class InstantCluster(pulumi.dynamic.Resource, module="runpod", name="InstantCluster"):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__(
            FakeProvider("InstantCluster"),
            name,
            {**props, "cost_per_hour": None, "storage_cost_per_month": None, "status": None},
        )


class NetworkVolume(pulumi.dynamic.Resource, module="runpod", name="NetworkVolume"):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__(
            FakeProvider("NetworkVolume"),
            name,
            {**props, "cost_per_hour": None, "storage_cost_per_month": None, "status": None},
        )


class Secret(pulumi.dynamic.Resource, module="runpod", name="Secret"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            FakeProvider("Secret"),
            name,
            {**props, "cost_per_hour": None, "storage_cost_per_month": None, "status": None},
            opts,
        )
