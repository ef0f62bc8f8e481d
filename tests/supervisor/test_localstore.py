"""The supervisor's local memory (a stack without a bucket): the S3 calls store.py makes, over files, with
S3's conditional writes, so two supervisors on one machine never both hold the lease (issue #42)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor import store
from supervisor.localstore import LOCAL_BUCKET, DirObjects, LocalStoreError
from supervisor.model import Decision, Observation, RoundRecord

T0 = 1_800_000_000.0


def test_conditional_writes_let_exactly_one_writer_through(tmp_path: Path) -> None:
    mem = DirObjects(tmp_path)
    first = mem.put_object(Bucket=LOCAL_BUCKET, Key="a/lease.json", Body=b"1", IfNoneMatch="*")
    with pytest.raises(LocalStoreError) as again:
        mem.put_object(Bucket=LOCAL_BUCKET, Key="a/lease.json", Body=b"2", IfNoneMatch="*")
    assert again.value.response["Error"]["Code"] == "PreconditionFailed"
    with pytest.raises(LocalStoreError):
        mem.put_object(Bucket=LOCAL_BUCKET, Key="a/lease.json", Body=b"3", IfMatch='"stale"')
    mem.put_object(Bucket=LOCAL_BUCKET, Key="a/lease.json", Body=b"4", IfMatch=first["ETag"])
    assert mem.get_object(Bucket=LOCAL_BUCKET, Key="a/lease.json")["Body"].read() == b"4"
    with pytest.raises(LocalStoreError) as missing:
        mem.get_object(Bucket=LOCAL_BUCKET, Key="a/none.json")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(LocalStoreError):
        mem.put_object(Bucket=LOCAL_BUCKET, Key="../outside", Body=b"x")


def test_the_lease_audit_and_notices_work_on_it(tmp_path: Path) -> None:
    mem = DirObjects(tmp_path)
    now = [T0]
    a = store.Lease(mem, LOCAL_BUCKET, "dev", "a", clock=lambda: now[0])
    b = store.Lease(mem, LOCAL_BUCKET, "dev", "b", clock=lambda: now[0])
    assert a.acquire() and not b.acquire() and b.held_by == "a"
    a.give_back()
    assert b.acquire()
    for minute in (10, 0, 5):
        o = Observation(at=T0 + minute * 60, phase="active", nodes=1, node0_reachable=True)
        store.write_audit(mem, LOCAL_BUCKET, RoundRecord("dev", o, Decision("none", f"m{minute}")))
    assert [r.decision.reason for r in store.read_audit(mem, LOCAL_BUCKET, "dev")] == ["m0", "m5", "m10"]
    store.write_notice(mem, LOCAL_BUCKET, "dev", ("run-1",), "over_budget:0.8", T0)
    assert store.read_notices(mem, LOCAL_BUCKET, "dev", ("run-1",)) == ("over_budget:0.8",)
    assert store.end_run(mem, LOCAL_BUCKET, "dev", T0)  # the compute is gone: the next run is warned anew
    assert store.read_notices(mem, LOCAL_BUCKET, "dev", ("run-2",)) == ()
