"""Issue #45: a preview runs fully on a Read Only RunPod key and writes nothing; an `up` with that key creates
nothing and says why. The engine is what is tested here (the providers' check() reads under the real CLI);
the key kinds themselves are tested in process (tests/emulator/test_keys.py, tests/providers/runpod/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.config import DEFAULT_READ_ONLY_KEY
from harness.local import LocalRunPod
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e


def writes(runpod: LocalRunPod) -> dict[str, dict[str, int]]:
    """Every REST write the local RunPod answered, by outcome (GraphQL is POST for queries too: left out)."""
    endpoints: dict[str, dict[str, int]] = runpod.admin.counters()["endpoints"]
    return {e: c for e, c in endpoints.items() if not e.startswith(("GET ", "HEAD ", "POST /graphql"))}


def test_preview_on_a_read_only_key_passes_and_up_on_it_creates_nothing(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str
) -> None:
    # prod too: an Instant Cluster and its data-center candidates, read the same way
    (tmp_path / "prod").mkdir()
    prod = open_stack(
        "prod", tmp_path / "prod", runpod, moto_s3, policy=True, RUNPOD_API_KEY=DEFAULT_READ_ONLY_KEY
    )
    prod.cli.extra_env["TRAINSTACK_READ_ONLY"] = "1"
    assert '"cost_per_hour"' in prod.preview("--json").stdout
    run = open_stack("dev", tmp_path, runpod, moto_s3, policy=True, RUNPOD_API_KEY=DEFAULT_READ_ONLY_KEY)
    run.cli.extra_env["TRAINSTACK_READ_ONLY"] = "1"
    preview = run.preview("--json")
    assert '"cost_per_hour"' in preview.stdout  # priced from the catalog, read with the read-only key
    assert sum(runpod.admin.counters()["endpoints"].get("GET /v2/catalog/gpus", {}).values()) >= 1
    assert writes(runpod) == {}

    del run.cli.extra_env["TRAINSTACK_READ_ONLY"]  # a deploy wrongly handed the preview's key
    up = run.up(check=False)
    assert up.returncode != 0
    assert "a preview never writes" in up.stdout + up.stderr
    assert all(set(c) <= {"403"} for c in writes(runpod).values()), writes(runpod)
    assert runpod.admin.live()["pods"] == [] and runpod.admin.live()["clusters"] == []
