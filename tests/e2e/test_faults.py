"""A flaky, slow, full or refusing RunPod: every `up` converges or fails with a clear message, and never
leaves an orphaned or duplicated billed resource (checked against the local RunPod's live view)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.local import LocalRunPod
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Fault:
    name: str
    faults: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # None: the first up converges; else words its failure must contain
    second_up_converges: bool = False


FAULTS = [
    # The client's own pacing is lifted so the server's 429s (with Retry-After) are what slows it down.
    Fault(
        "429 storm with Retry-After", limits={"ratePerMinute": 30}, env={"RUNPOD_RATE_LIMIT_PER_MIN": "6000"}
    ),
    Fault("30 % of requests answer 503", faults={"errorRate": 0.3, "seed": 11}),
    # Every create outlasts the 1 s client timeout until the retry deadline: a clear failure, nothing
    # rented twice; once RunPod is fast again the next up converges.
    Fault(
        "create slower than the client timeout",
        faults={"latencyMs": 1500, "matchMethod": "POST", "matchPath": "/v2/pods"},
        env={"TRAINSTACK_HTTP_TIMEOUT_S": "1", "TRAINSTACK_HTTP_DEADLINE_S": "6"},
        error="outcome unknown",
        second_up_converges=True,
    ),
    Fault("lost create response", faults={"loseNext": 1, "matchMethod": "POST", "matchPath": "/v2/pods"}),
    Fault(
        "capacity exhausted for the first create",
        capacity={"exhaustNext": 1},
        error="no capacity",
        second_up_converges=True,
    ),
    Fault("capacity exhausted for good", capacity={"exhausted": True}, error="no capacity"),
    Fault("account spend limit reached", limits={"spendLimit": 10}, error="spend limit"),
    Fault("invalid API key", env={"RUNPOD_API_KEY": "rpa_wrong_key_5f1c9e"}, error="API key"),
]


@pytest.fixture
def clean(runpod: LocalRunPod) -> Iterator[LocalRunPod]:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    yield runpod
    runpod.admin.reset()


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_fault(fault: Fault, tmp_path: Path, clean: LocalRunPod, moto_s3: str, report: Report) -> None:
    run = open_stack("dev", tmp_path, clean, moto_s3, **fault.env)
    if fault.limits:
        clean.admin.limits(**fault.limits)
    if fault.capacity:
        clean.admin.capacity(**fault.capacity)
    if fault.faults:
        clean.admin.faults(**fault.faults)

    first = run.up(check=False)
    output = first.stdout + first.stderr
    clean.admin.faults(errorRate=0.0, latencyMs=0)
    runs = 1
    if fault.error is None:
        assert first.returncode == 0, output
        outcome = "converged"
    else:
        assert first.returncode != 0, output
        assert fault.error.lower() in output.lower(), output
        assert "Traceback" not in output, output
        assert "rpa_wrong_key_5f1c9e" not in output  # a rejected key is never echoed
        outcome = f"failed clearly ({fault.error})"
        if fault.second_up_converges:
            run.up()
            runs, outcome = 2, outcome + "; the next up converged"
    orphaned, duplicated = orphans(run), duplicates(clean)
    report.record(f"fault: {fault.name}", outcome, orphaned, duplicated, runs)
    assert orphaned == [] and duplicated == []
    if fault.error is None or fault.second_up_converges:
        run.up("--expect-no-changes")
    if "RUNPOD_API_KEY" not in fault.env:
        run.destroy()
        assert orphans(run) == []
