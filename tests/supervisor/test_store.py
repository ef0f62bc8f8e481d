"""The supervisor's bucket side against a moto S3 server: the lease (two at once -> exactly one), the run
state written by the node tool and verified (a forged checksum never verifies), and the audit lines."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from supervisor import store
from supervisor.model import Decision, Observation, RoundRecord
from tests.supervisor.test_outage import BucketLater
from train.node import transfer as node_transfer

pytestmark = pytest.mark.services  # a moto S3 server beside the test


@pytest.fixture
def s3(moto_s3: str) -> Any:
    return boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"sup-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _take(
    s3: Any, bucket: str, stack: str, holder: str, barrier: threading.Barrier, won: dict[str, bool]
) -> None:
    lease = store.Lease(s3, bucket, stack, holder)
    barrier.wait(timeout=30)
    won[holder] = lease.acquire()


def test_two_supervisors_at_once_exactly_one_holds_the_lease(s3: Any, bucket: str) -> None:
    for attempt in range(10):
        stack = f"race{attempt}"
        barrier = threading.Barrier(2)
        won: dict[str, bool] = {}

        threads = [
            threading.Thread(target=_take, args=(s3, bucket, stack, h, barrier, won))
            for h in ("laptop", "ci")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(won.values()) == [False, True], (attempt, won)


def test_lease_expires_is_given_back_and_is_never_deleted(s3: Any, bucket: str) -> None:
    clock = Clock()
    a = store.Lease(s3, bucket, "dev", "a", ttl_s=600, clock=clock)
    b = store.Lease(s3, bucket, "dev", "b", ttl_s=600, clock=clock)
    assert a.acquire() and not b.acquire() and b.held_by == "a"
    # a was killed mid-action: once the bucket's clock says the ttl passed, the next one takes over
    b.s3 = BucketLater(s3, 601)
    assert b.acquire()
    assert not a.acquire()
    b.give_back()
    assert a.acquire()  # given back = expired at once
    versions = s3.list_object_versions(Bucket=bucket, Prefix=store.lease_key("dev"))
    assert not versions.get("DeleteMarkers")


def _upload_run(s3: Any, bucket: str, tmp_path: Path, nodes: int = 1) -> dict[str, str]:
    prefix = "trainstack/dev-pod-0/"
    data = b"weights" * 1000
    s3.put_object(Bucket=bucket, Key=prefix + "step-10.pt", Body=b"old")
    s3.put_object(Bucket=bucket, Key=prefix + "step-20.pt", Body=data)
    progress = tmp_path / "progress.jsonl"
    progress.write_text(json.dumps({"step": 20, "loss": 0.25}) + "\n")
    return {
        "TRAINSTACK_RUN_ID": "dev-pod-0.pod1",
        "NODE_RANK": "0",
        "NUM_NODES": str(nodes),
        "TRAINSTACK_PROGRESS_FILE": str(progress),
        "TRAINSTACK_STARTED_AT": "1700000000",
        "TRAINSTACK_FINISH_WAIT_S": "0",
        "sha": hashlib.sha256(data).hexdigest(),
    }


def test_node_writes_the_run_state_and_the_supervisor_verifies_it(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    env = _upload_run(s3, bucket, tmp_path)
    lines = node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, env)
    assert "finished at step 20" in lines[0]
    raw = json.loads(s3.get_object(Bucket=bucket, Key="run/dev-pod-0.pod1/state.json")["Body"].read())
    assert raw["checkpoint"] == {"key": "trainstack/dev-pod-0/step-20.pt", "size": 7000, "sha256": env["sha"]}
    assert raw["final_loss"] == 0.25 and raw["started_at"] == 1700000000
    state = store.verify_run(s3, bucket, "dev-pod-0.pod1")
    assert (state.status, state.verified, state.last_step, state.final_loss) == ("finished", True, 20, 0.25)


def test_forged_checksum_never_verifies(s3: Any, bucket: str, tmp_path: Path) -> None:
    env = _upload_run(s3, bucket, tmp_path)
    node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, env)
    key = "run/dev-pod-0.pod1/state.json"
    record = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    record["checkpoint"]["sha256"] = "0" * 64
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    state = store.verify_run(s3, bucket, "dev-pod-0.pod1")
    assert state.status == "finished" and not state.verified and "sha256" in state.why
    record["checkpoint"].update(sha256=env["sha"], size=6999)  # a torn size
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    assert "bytes" in store.verify_run(s3, bucket, "dev-pod-0.pod1").why
    record["checkpoint"]["key"] = "trainstack/dev-pod-0/step-99.pt"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    assert "not in the bucket" in store.verify_run(s3, bucket, "dev-pod-0.pod1").why
    s3.put_object(Bucket=bucket, Key=key, Body=b"not json")
    assert store.verify_run(s3, bucket, "dev-pod-0.pod1").status == "unreadable"
    assert store.verify_run(s3, bucket, "dev-pod-0.other").status == "absent"


def test_rank_0_waits_for_every_node_and_says_who_did_not_sync(s3: Any, bucket: str, tmp_path: Path) -> None:
    env = {**_upload_run(s3, bucket, tmp_path, nodes=2), "TRAINSTACK_FINISH_WAIT_S": "10"}
    clock = Clock()
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        clock.t += seconds

    lines = node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, env, clock=clock, sleep=nap)
    assert naps and "no sync mark from nodes 1" in lines[0]
    assert store.verify_run(s3, bucket, "dev-pod-0.pod1").status == "failed"
    # node 1 marks itself; rank 0 then finds both marks at once
    node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, {**env, "NODE_RANK": "1"})
    naps.clear()
    lines = node_transfer.finish(s3, bucket, "trainstack/dev-pod-0/", 0, env, clock=clock, sleep=nap)
    assert not naps and "finished" in lines[0]


def test_audit_lines_round_trip_in_time_order(s3: Any, bucket: str) -> None:
    for minute in (10, 0, 5):
        o = Observation(at=1_800_000_000.0 + minute * 60, phase="active", nodes=1, node0_reachable=True)
        store.write_audit(s3, bucket, RoundRecord("dev", o, Decision("none", f"m{minute}"), holder="h/1 x"))
    records = store.read_audit(s3, bucket, "dev")
    assert [r.decision.reason for r in records] == ["m0", "m5", "m10"]
    assert [r.decision.reason for r in store.read_audit(s3, bucket, "dev", since=1_800_000_000.0 + 240)] == [
        "m5",
        "m10",
    ]
