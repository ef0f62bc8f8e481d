"""`runpod:NetworkVolume`: NVMe-backed storage in one data center; grows in place, never shrinks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, ReadResult, UpdateResult

from common import contract
from providers.common import InputModel, contains_unknown
from providers.resource import TypedResource
from providers.runpod import capacity, catalog, errors
from providers.runpod.base import UNKNOWN, RunPodProvider, args_of, is_unknown
from providers.runpod.models import VolumeSpec

if TYPE_CHECKING:  # request/response records load where a verb calls RunPod
    from providers.runpod.records import ApiVolume


class NetworkVolumeProvider(RunPodProvider):
    """Lifecycle of `runpod:NetworkVolume`; data center and type are fixed, size only grows."""

    args_model = VolumeSpec
    replace_keys = frozenset({"data_center_id", "volume_type"})

    def costs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        size: Any = values.get("size_gb")
        monthly = UNKNOWN if is_unknown(size) else catalog.volume_monthly(int(size))
        # Billed hourly even with no pod attached; reported as storage, not as compute per hour.
        return {
            "cost_per_hour": 0.0,
            "storage_cost_per_month": monthly,
            "price_source": f"snapshot-{catalog.SNAPSHOT_DATE} (storage rates)",
        }

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Fills in `data_center_id` from `placement` when the stack lists several data centers: the one
        in the state while it is still listed (a volume never moves on its own), else the first the
        catalog does not read NONE for the compute (the commitment the cluster and pods then follow)."""
        plan = news.get("placement")
        if not news.get("data_center_id") and isinstance(plan, dict) and not contains_unknown(plan):
            candidates = [str(dc) for dc in plan.get("candidates") or [] if dc]
            kept = olds.get("data_center_id")
            read = None
            if not (isinstance(kept, str) and kept in candidates) and len(candidates) > 1:
                query = capacity.CapacityQuery(
                    str(plan.get("gpu_type_id")),
                    int(plan.get("gpu_count") or 1),
                    str(plan.get("product")),
                    str(plan.get("cloud") or "SECURE"),
                )
                read = capacity.read_capacity(self.client, query)
            chosen = capacity.choose(candidates, read, kept if isinstance(kept, str) else None)
            news = {**news, "data_center_id": chosen}
        return super().check(olds, news)

    def same(self, key: str, old: Any, new: Any) -> bool:
        # `placement` only chooses where a new volume goes; `data_center_id` is what it is bound to.
        return key == "placement" or super().same(key, old, new)

    def transition_failures(self, olds: Mapping[str, Any], new: InputModel) -> list[CheckFailure]:
        assert isinstance(new, VolumeSpec)
        old_size = olds.get("size_gb")
        if isinstance(old_size, int | float) and not is_unknown(old_size) and new.size_gb < old_size:
            return [
                CheckFailure(
                    "size_gb",
                    f"network volumes cannot shrink ({int(old_size)} GB -> "
                    f"{new.size_gb} GB); keep size_gb >= {int(old_size)} or create a new volume",
                )
            ]
        return []

    def create(self, props: dict[str, Any]) -> CreateResult:
        from providers.runpod.records import VolumeCreate

        args = args_of(VolumeSpec, props)
        body = VolumeCreate(
            name=args.name, size=args.size_gb, data_center=args.data_center_id, type=args.volume_type
        )
        with self.client() as client:
            volume = client.create_volume(body)
        return CreateResult(volume.id, self._outs(props, volume))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            try:
                volume = client.get_volume(id_)
            except errors.NotFoundError:
                return ReadResult(None, {})
        refreshed = {
            **props,
            "name": volume.name,
            "size_gb": volume.size,
            "data_center_id": volume.data_center,
        }
        if volume.type:
            refreshed["volume_type"] = volume.type
        return ReadResult(id_, self._outs(refreshed, volume))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        from providers.runpod.records import VolumePatch

        args = args_of(VolumeSpec, news)
        old_size = int(olds.get("size_gb") or 0)
        if args.size_gb < old_size:  # check() already refused this; never send a shrink
            raise errors.RunPodError(f"refusing to shrink network volume {id_} from {old_size} GB")
        patch = VolumePatch(
            name=args.name if args.name != olds.get("name") else None,
            size=args.size_gb if args.size_gb != old_size else None,
        )
        with self.client() as client:
            if patch.name is None and patch.size is None:
                volume = client.get_volume(id_)
            else:
                volume = client.update_volume(id_, patch)
        return UpdateResult(self._outs(news, volume))

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        with self.client() as client:
            client.delete_volume(id_)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        new_size, old_size = news.get("size_gb"), olds.get("size_gb")
        if (
            not is_unknown(new_size)
            and isinstance(old_size, int | float)
            and new_size is not None
            and float(new_size) < float(old_size)
        ):
            # check() normally stops this first; a diff against refreshed state can still see it.
            raise errors.RunPodError(
                f"network volume {id_} cannot shrink from {old_size} GB to {new_size} GB"
            )
        return super().diff(id_, olds, news)

    def _outs(self, props: Mapping[str, Any], volume: ApiVolume) -> dict[str, Any]:
        return self.outputs(self.carried(props), volume_id=volume.id)


class NetworkVolume(TypedResource, module=contract.VOLUME.module, name=contract.VOLUME.name):
    """A RunPod network volume (`pulumi-python:dynamic/runpod:NetworkVolume`); see NetworkVolumeInputs."""

    provider_factory = NetworkVolumeProvider
    # data_center_id: an input, declared so the attribute exists when check() chooses it (placement).

    volume_id: pulumi.Output[str]
    data_center_id: pulumi.Output[str]
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]
    price_source: pulumi.Output[str]
