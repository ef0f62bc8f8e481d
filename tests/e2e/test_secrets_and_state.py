"""Secrets never appear in plain text, an older stack's RunPod secrets are carried over once GraphQL is gone,
and a team's shared S3 state refuses a second concurrent `up`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.e2e.old_secrets import SECRET_TYPE, with_old_secrets
from tests.e2e.reliability import Report, duplicates, orphans
from tests.e2e.stacks import open_stack
from tests.polling import poll

pytestmark = pytest.mark.e2e

PLANTED_KEY = "rpa_PLANTEDKEY7f3c9e1d2b4a6f80"
PLANTED = {
    "HF_TOKEN": "hf_PLANTEDhuggingface5e9a1c3b7d",
    "WANDB_API_KEY": "PLANTEDwandb0c4f8a2e6b1d9f3a5c7e",
    "AWS_ACCESS_KEY_ID": "AKIAPLANTEDNODEKEY01",
    "AWS_SECRET_ACCESS_KEY": "PLANTED/node/secret/3b8e1f0a9c2d4e6f",
}
PLANTED_ENV_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIAPLANTEDENVKEY002",
    "AWS_SECRET_ACCESS_KEY": "PLANTED/env/secret/9d1c",
}


@pytest.fixture(scope="module")
def keyed_runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    server = start_local_runpod(tmp_path_factory.mktemp("keyed-runpod"), *FAST_ARGS, api_key=PLANTED_KEY)
    yield server
    server.stop()


def _definitions(runpod: LocalRunPod) -> str:
    with runpod.client() as api:
        listed = [api.get(path, params=params).text for path, params in (
            ("/v2/pods", {"includeClusterPods": "true"}), ("/v2/clusters", {}))]  # fmt: skip
    assert "TRAINSTACK_OWNER" in listed[0], listed  # the members' env is in what is scanned
    return "".join(listed)


def _hits(text: str) -> list[str]:
    values = [PLANTED_KEY, *PLANTED.values(), *PLANTED_ENV_AWS.values()]
    return [v for v in values if v in text]


def test_planted_secrets_appear_nowhere(
    tmp_path: Path, keyed_runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    run = open_stack("prod", tmp_path, keyed_runpod, moto_s3, policy=True, passphrase=True, **PLANTED_ENV_AWS)
    for name, value in PLANTED.items():
        run.cli.run("config", "set", "--secret", "--stack", "prod", f"trainstack:secrets.{name}", value)
    outputs = [
        run.preview(),
        run.up(preview=True),
        run.refresh(),
        run.up("--expect-no-changes", preview=True),
    ]
    bad_key = open_stack(
        "dev",
        tmp_path / "bad",
        keyed_runpod,
        moto_s3,
        policy=True,
        passphrase=True,
        RUNPOD_API_KEY=PLANTED_KEY[::-1],
    )
    refused = bad_key.up(check=False)
    assert refused.returncode != 0 and "API key" in refused.stdout + refused.stderr

    scanned = {
        "stack export": run.cli.run("stack", "export", "--stack", "prod").stdout,
        "stack outputs": run.cli.run("stack", "output", "--json", "--show-secrets", "--stack", "prod").stdout,
        "CLI output": "".join(p.stdout + p.stderr for p in [*outputs, refused]),
        "out/ artifacts": "".join(p.read_text() for p in run.out_dir.rglob("*") if p.is_file()),
        "state backend files": "".join(
            p.read_text(errors="replace") for p in (tmp_path / "state" / "backend").rglob("*") if p.is_file()
        ),
        "local RunPod log": (keyed_runpod.state_dir / "emulator.log").read_text(errors="replace"),
        "local RunPod audit log": str(keyed_runpod.admin.audit()),
        # What anyone with RunPod console or API access reads: the cluster's and its pods' definitions (env
        # included), as the API serves them and as the local RunPod stores them (issue #67).
        "RunPod's pod and cluster definitions": _definitions(keyed_runpod),
        "local RunPod's stored records": "".join(
            p.read_bytes().decode(errors="replace") for p in keyed_runpod.state_dir.rglob("*") if p.is_file()
        ),
    }
    found = {where: _hits(text) for where, text in scanned.items() if _hits(text)}
    orphaned, duplicated = orphans(run), duplicates(keyed_runpod)
    report.record(
        "secrets: planted RunPod key, HF/W&B tokens, AWS keys",
        f"0 plain-text hits in {len(scanned)} places ({', '.join(scanned)})"
        if not found
        else f"LEAKED: {found}",
        orphaned,
        duplicated,
        runs=len(outputs) + 1,
    )
    assert found == {}
    run.destroy()


def test_an_old_stacks_secrets_are_dropped_once_graphql_is_gone(
    tmp_path: Path, keyed_runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    """Issue #67: a stack whose state holds `runpod:Secret` (made while GraphQL answered) is carried over by
    `pulumi up` (scripts/up's) alone once GraphQL answers 410: each secret dropped from the state with a line
    naming what is left in the RunPod console; `pulumi destroy` (scripts/down's) then takes it down."""
    runpod = keyed_runpod
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000, graphql="on")  # as RunPod answered when the stack was made
    run = open_stack("dev", tmp_path, runpod, moto_s3, passphrase=True)
    run.up()
    ids = with_old_secrets(run, runpod, tmp_path)
    assert sum(r["type"] == SECRET_TYPE for r in run.cli.resources()) == 2

    runpod.admin.limits(graphql="gone")
    carried = run.up()  # no manual step
    said = carried.stdout + carried.stderr
    for sid in ids:
        assert sid in said and "dropped from the state without deleting it" in said
    assert "trainstack-dev-aws_access_key_id" in said and "RunPod console" in said
    assert not [r for r in run.cli.resources() if r["type"] == SECRET_TYPE]
    assert sorted(s["id"] for s in runpod.admin.live()["secrets"]) == sorted(ids)  # left for a person
    run.destroy()
    assert runpod.admin.live()["pods"] == [] and len(orphans(run)) == 2  # the two secrets, named above
    report.record(
        "secrets: an older stack's runpod:Secret, GraphQL answering 410",
        "up dropped both from the state, naming them for the console; destroy passed",
        [],
        duplicates(runpod),
        runs=3,
    )


@pytest.fixture
def s3_backend(moto_s3: str) -> str:
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="team-pulumi-state")
    return f"s3://team-pulumi-state?endpoint={moto_s3.removeprefix('http://')}&region=us-east-1&s3ForcePathStyle=true&disableSSL=true"


@pytest.fixture(scope="module")
def frozen_runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    """A local RunPod whose clock moves only through `admin.advance`: a pod stays PROVISIONING, and the `up`
    creating it stays inside its update (holding the stack's lock), until the test moves the clock."""
    server = start_local_runpod(tmp_path_factory.mktemp("frozen-runpod"), *FAST_ARGS, "--time-scale", "0")
    yield server
    server.stop()


def test_shared_s3_state_locks_out_a_second_up(
    tmp_path: Path, frozen_runpod: LocalRunPod, moto_s3: str, s3_backend: str, report: Report
) -> None:
    # The second `up` must meet the lock while the first is certainly inside its update: the first is held
    # there by a pod that cannot become ready until the clock moves, so how fast either CLI runs on a busy
    # machine cannot matter (with a real clock the first could finish before the second started: issue 31).
    runpod = frozen_runpod
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000)
    run = open_stack(
        "dev", tmp_path, runpod, moto_s3, policy=True, passphrase=True, PULUMI_BACKEND_URL=s3_backend
    )
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    first = subprocess.Popen(
        ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", "dev"],
        cwd=run.cli.project, env=run.cli.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        poll(
            lambda: (
                first.poll() is not None
                or (
                    s3.list_objects_v2(Bucket="team-pulumi-state", Prefix=".pulumi/locks/").get("KeyCount")
                    and runpod.admin.live()["pods"]
                )
            ),
            "the first up holds the lock with its pod created",
            180,
            0.1,
        )
        assert first.poll() is None, f"the first up ended before the clock moved:\n{first.communicate()[0]}"
        second = run.cli.run("up", "--yes", "--skip-preview", "--stack", "dev", check=False, timeout=300)
        assert first.poll() is None, "the first up ended while its pod could not be ready"
        assert second.returncode != 0 and "locked" in second.stdout + second.stderr, second.stdout
    finally:
        runpod.admin.advance(120)  # the pod becomes ready; the first up finishes
        out_first, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out_first
    assert not s3.list_objects_v2(Bucket="team-pulumi-state", Prefix=".pulumi/locks/").get("KeyCount")
    run.up("--expect-no-changes")  # the state the first up wrote is whole and current
    orphaned, duplicated = orphans(run), duplicates(runpod)
    report.record(
        "shared state: S3 backend (moto), two concurrent ups",
        "second refused by the lock; state valid",
        orphaned,
        duplicated,
        runs=2,
    )
    assert orphaned == [] and duplicated == []
    runpod.admin.advance(120)
    run.destroy()
