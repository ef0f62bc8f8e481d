"""Back-to-back previews price from one catalog read: the provider processes share it through a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.local import LocalRunPod
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e

CATALOG = "GET /v2/catalog/gpus"


def catalog_reads(runpod: LocalRunPod) -> int:
    return sum(runpod.admin.counters()["endpoints"].get(CATALOG, {}).values())


def test_previews_share_one_catalog_read(tmp_path: Path, runpod: LocalRunPod, moto_s3: str) -> None:
    cache = tmp_path / "cache"
    run = open_stack(
        "dev", tmp_path, runpod, moto_s3, TRAINSTACK_CATALOG_TTL_S="900", TRAINSTACK_CACHE=str(cache)
    )
    before = catalog_reads(runpod)
    for _ in range(2):
        preview = run.preview("--json")
        assert '"cost_per_hour"' in preview.stdout
    assert catalog_reads(runpod) - before == 1  # the second preview's provider process read the file
    files = list((cache / "catalog").glob("*.json"))
    assert len(files) == 1
    assert runpod.api_key not in files[0].read_text()

    run.cli.extra_env["TRAINSTACK_CATALOG_TTL_S"] = "0"  # turned off: every process reads the catalog
    run.preview()
    assert catalog_reads(runpod) - before == 2
