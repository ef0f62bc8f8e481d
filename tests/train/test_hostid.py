"""A bad host is not rented twice (train/node/hostid.py): a host failing its gate is recorded in the stack's
bucket by its GPUs' UUIDs, a replace that lands on it again is refused at its health gate, another host is
not, and an XID of the replace class seen by the agent records the host too."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.train.recorded import node_of, write_replay
from train.node import diagnostics, hang, healthgate, hostid
from train.node.nvml import ReplaySampler, with_fault
from train.node.watchdog import Watchdog


class FakeS3:
    """The few calls hostid makes, over a dict (key -> bytes)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> None:
        self.objects[Key] = Body

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[Key])}

    def get_paginator(self, name: str) -> Any:
        objects = self.objects

        def paginate(Bucket: str, Prefix: str) -> list[dict[str, Any]]:
            return [{"Contents": [{"Key": k} for k in sorted(objects) if k.startswith(Prefix)]}]

        return SimpleNamespace(paginate=paginate)


def gate(tmp_path: Path, readings: list[Any], s3: FakeS3, pod: str) -> tuple[int, list[str]]:
    """The gate's verdict and lines on these readings, with the bucket's failed hosts."""
    section, lines = healthgate.run_gate(ReplaySampler([readings]), len(readings), "cluster", env={})
    env = {"TRAINSTACK_CHECKPOINT_BUCKET": "b", "RUNPOD_POD_ID": pod}
    lines = healthgate.known_bad_host(section, lines, "cluster", env, s3)
    return (1 if lines else 0), lines


def other_host(n: int) -> list[Any]:
    return [replace(r, uuid=f"GPU-other-{r.index}") for r in node_of(n)]


def test_a_replace_onto_a_host_that_failed_is_caught_at_its_gate(tmp_path: Path) -> None:
    s3 = FakeS3()
    sick = with_fault(node_of(8), 6, xid_events=(48,))
    status, lines = gate(tmp_path, sick, s3, "pod-a")
    assert status == 1 and "XID" in lines[0]
    [key] = s3.objects
    assert key == "hosts/failed/GPU-test-0.json"
    assert json.loads(s3.objects[key])["pod"] == "pod-a"
    # The replace lands on the same machine (a new pod id, the same GPUs, healthy-looking now): refused first.
    status, lines = gate(tmp_path, node_of(8), s3, "pod-b")
    assert status == 1
    assert lines[0].startswith("node: this host failed before on this stack (pod pod-a: GPU 6")
    assert "GPU GPU-test-0" in lines[0] and lines[0].endswith("elsewhere")
    # Another machine passes.
    assert gate(tmp_path, other_host(8), s3, "pod-c") == (0, [])


def test_without_a_bucket_the_gate_stands_alone(tmp_path: Path) -> None:
    section, lines = healthgate.run_gate(ReplaySampler([node_of(2)]), 2, "pod", env={})
    assert healthgate.known_bad_host(section, lines, "pod", {}) == []


def test_the_gate_main_refuses_a_known_bad_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    s3 = FakeS3()
    hostid.mark_failed(s3, "b", hostid.HostId.of(node_of(2)), "pod-a", "XID 79")
    monkeypatch.setattr(hostid, "client", lambda: s3)
    monkeypatch.setenv("TRAINSTACK_CHECKPOINT_BUCKET", "b")
    monkeypatch.setenv(healthgate.REPLAY_ENV, str(write_replay(tmp_path / "replay.json", node_of(2))))
    record = tmp_path / "health.json"
    assert healthgate.main(["--record", str(record), "--expected-gpus", "2"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("node: this host failed before on this stack (pod pod-a: XID 79")
    saved = json.loads(record.read_text())
    assert saved["status"] == "fail" and saved["gate"]["reason"] == last


def test_an_xid_of_the_replace_class_records_the_host(tmp_path: Path) -> None:
    marked: list[tuple[Any, str]] = []
    dog = Watchdog(
        "p1",
        hang.Bounds(),
        None,
        tmp_path / "restarts.jsonl",
        find_ranks=lambda: [diagnostics.Rank(42, 0, 0, "R")],
        kill=lambda pids: None,
        log=lambda _: None,
        host_failed=lambda gpus, why: marked.append((gpus, why)),
    )
    gpus = [SimpleNamespace(index=0, uuid="GPU-x", xid_events=())]
    dog.tick(None, gpus, 0)
    gpus = [SimpleNamespace(index=0, uuid="GPU-x", xid_events=(79,))]
    assert dog.tick(None, gpus, 1) is None  # no restart: the supervisor replaces
    assert [why for _, why in marked] == ["GPU 0: XID 79"]
    assert hostid.HostId.of(marked[0][0]).gpu_uuids == ("GPU-x",)
