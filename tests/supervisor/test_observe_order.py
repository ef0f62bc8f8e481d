"""observe() reads the nodes' exit records before the run states: a start script writes its run state (the
job's rank 0) before its exit record, so a state read after an exit record is at least as new as that node's
end. Read the other way round, a round that straddles the job's end sees the node ended and the state not yet
written, and releases a finished run as one that ended without finishing."""

from __future__ import annotations

from typing import Any

from stackconfig.files import load
from supervisor.observe import Sources, observe
from tests.supervisor.test_slurm_observe import OUTPUTS


class _NoSuchKey(Exception):
    response = {"Error": {"Code": "NoSuchKey"}}  # noqa: RUF012  (botocore's shape, read by store._missing)


class _Bucket:
    """Records which of the run's objects were read, in order."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def get_paginator(self, _name: str) -> Any:
        return self  # the recoveries' listing: no pages

    def paginate(self, **_kw: Any) -> list[dict[str, Any]]:
        return []

    def list_objects_v2(self, Bucket: str, Prefix: str) -> dict[str, Any]:
        if Prefix.startswith("run/"):
            self.reads.append(f"list {Prefix}")
        return {"Contents": []}

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key.startswith("run/"):
            self.reads.append(f"get {Key}")
        raise _NoSuchKey(Key)


def test_the_exit_records_are_read_before_the_run_state() -> None:
    config = load("local-cpu")
    assert config.bucket is not None
    bucket = _Bucket()
    src = Sources(
        aggregator=lambda _s, _o: {"time": 1.0, "nodes": []},
        billing=lambda _o, **_kw: 1.0,
        pod_statuses=lambda _ids: {},
        exits=lambda _s, _o, _p: {},
        ssh_key=lambda: True,
        slurm=lambda _s, _o: "",
        s3=bucket,
    )
    observe("local-cpu", config, OUTPUTS, 1_800_000_000.0, src)
    kinds = [r.split("/")[-1] or r.split("/")[-2] + "/" for r in bucket.reads]  # exit/, node-restarts/
    assert kinds and kinds[-1] == "state.json" and "exit/" in kinds, bucket.reads
    assert kinds.index("state.json") > max(i for i, k in enumerate(kinds) if k == "exit/"), bucket.reads


def test_every_nodes_exit_record_is_read_whatever_the_aggregator_says() -> None:
    """A stale aggregator file that says every node answered hid the nodes' exit records (issue #63: a
    finished cluster whose run state failed to write was restarted three times, not released as job_ended)."""
    from train.node.exitrecord import ExitRecord

    asked: list[str] = []

    def exits(_s: str, _o: Any, pods: Any) -> dict[str, Any]:
        asked.extend(pods)
        return {p: ExitRecord("finished", "finish", 0, "done", node=p) for p in pods}

    stale = {"time": 1.0, "nodes": [{"node": "a", "ok": True}, {"node": "b", "ok": True}]}
    src = Sources(
        aggregator=lambda _s, _o: stale,
        billing=lambda _o, **_kw: 1.0,
        pod_statuses=lambda _ids: {},
        exits=exits,
        ssh_key=lambda: True,
        slurm=lambda _s, _o: "",
    )
    obs = observe("local-cpu", load("local-cpu"), OUTPUTS, 1_800_000_000.0, src)
    assert sorted(asked) == ["podA", "podB"]
    assert [(e.pod_id, e.status) for e in obs.exits] == [("podA", "finished"), ("podB", "finished")]
