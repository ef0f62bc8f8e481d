"""Prices and the GPU table: one snapshot, read by the table, the providers and the local RunPod."""

from __future__ import annotations

import json
from pathlib import Path

from facts.gpus import GPUS, gpu_spec
from facts.money import HOURS_PER_MONTH, SNAPSHOT, burn_per_hour
from providers.runpod import catalog

EMULATOR_CATALOG = Path(__file__).resolve().parents[2] / "emulator" / "data" / "catalog-2026-11-09.json"


def test_every_gpu_in_the_table_has_a_snapshot_price() -> None:
    for spec in GPUS.values():
        assert spec.price_per_gpu_hour == SNAPSHOT.gpus[spec.api_id].secure
    assert gpu_spec("H100_SXM").price_per_gpu_hour == 3.99


def test_the_providers_fallback_is_the_snapshot() -> None:
    book = catalog.snapshot("test")
    assert book.gpu_hourly("NVIDIA H100 80GB HBM3", "COMMUNITY") == 2.69
    assert book.source.startswith(f"snapshot-{SNAPSHOT.date}")
    assert catalog.volume_monthly(1500) == round(1000 * 0.07 + 500 * 0.05, 4)


def test_the_local_runpod_serves_the_snapshot_prices_for_our_gpus() -> None:
    # The emulator keeps its own catalog (it models RunPod, not us); the H100 rows must still agree.
    served = {g["id"]: g["price"] for g in json.loads(EMULATOR_CATALOG.read_text())["gpus"]}
    for gid, price in SNAPSHOT.gpus.items():
        assert served[gid] == {"secure": price.secure, "community": price.community}


def test_burn_spreads_storage_over_the_month() -> None:
    assert burn_per_hour(1.0, HOURS_PER_MONTH) == 2.0
