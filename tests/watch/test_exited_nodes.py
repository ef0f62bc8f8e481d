"""A node whose start script ended shows that it ended, how, and its log's last lines (issue #43): not
"unknown" and a message about the aggregator, which on such a node never writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from rich.console import Console

from providers.delivery.ssh import DeliveryError, SshTarget, UnreachableError
from stackview import sources
from tests.polling import scaled
from tests.watch.conftest import REAL_EXIT_RECORDS
from train.node import exitrecord
from watch import cli
from watch.render import render

OUTPUTS = {
    "nodes": [{"rank": 0, "ip": "10.1.0.2", "pod_id": "pod-a", "ssh_endpoint": "127.0.0.1:2201"}],
    "cost_per_hour": 31.93,
    "workdir": "/workspace/trainstack",
}
RECORD = {
    "version": 1,
    "status": "failed",
    "phase": "preflight",
    "exit_status": 1,
    "reason": "preflight failed (exit 127); see above",
    "node": "pod-a",
    "log_tail": [
        "[trainstack 05:22:49 node 0] free disk: 75 GB at /workspace/checkpoints (floor 1 GB)",
        "/workspace/trainstack/start-node-0.sh: line 243: torchrun: command not found",
        "[trainstack 05:22:49 node 0] FATAL: preflight failed (exit 127); see above",
    ],
}


def test_exit_records_are_read_per_node_and_junk_is_left_out() -> None:
    asked: list[str] = []

    def run(target: SshTarget, command: str) -> str:
        asked.append(command)
        if target.alias == "pod-b":
            raise DeliveryError("ssh: connection refused")
        return json.dumps(RECORD) if target.alias == "pod-a" else "not json"

    outputs = dict(
        OUTPUTS,
        nodes=[
            *OUTPUTS["nodes"],
            {"rank": 1, "ip": "10.1.0.3", "pod_id": "pod-b", "ssh_endpoint": "h:22"},
            {"rank": 2, "ip": "10.1.0.4", "pod_id": "pod-c", "ssh_endpoint": "h:23"},
        ],
    )
    got = REAL_EXIT_RECORDS("dev", outputs, ["pod-a", "pod-b", "pod-c"], run=run)
    assert set(got) == {"pod-a"} and got["pod-a"].phase == "preflight"
    [pod_a] = [c for c in asked if "pod-a.json" in c]
    assert "/workspace/trainstack/metrics/exit-node-" in pod_a and len(asked) == 3


def test_the_nodes_are_asked_at_once_and_answers_keep_node_order() -> None:
    """Eight nodes that each answer only once all eight are asked: one after the other, the first waits
    for the rest forever (the barrier's deadline only bounds how long the failure takes to say so)."""
    nodes = [
        {"rank": r, "ip": f"10.1.0.{r + 2}", "pod_id": f"pod-{r}", "ssh_endpoint": f"h:{2200 + r}"}
        for r in range(8)
    ]
    all_asked = threading.Barrier(len(nodes), timeout=scaled(20))

    def run(target: SshTarget, command: str) -> str:
        all_asked.wait()
        if target.alias == "pod-3":
            raise DeliveryError("ssh: connection refused")
        return f"{target.alias} log line\n"

    tails = sources.training_log_tails(
        "prod", dict(OUTPUTS, nodes=nodes), [n["pod_id"] for n in nodes], run=run
    )
    assert list(tails) == [f"pod-{r}" for r in range(8) if r != 3]  # node order, the unreachable left out
    assert tails["pod-5"] == ["pod-5 log line"]


def test_a_node_that_died_at_preflight_shows_exited_the_reason_and_the_fatal_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_state(stack: str, outputs: object, run: object) -> dict[str, object]:
        raise sources.NoStateError("node 0 (pod-a) answered but has no state: the aggregator writes it ...")

    record = exitrecord.parse(RECORD)
    assert record is not None
    monkeypatch.setattr(sources, "aggregator_state", no_state)
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    monkeypatch.setattr(sources, "exit_records", lambda stack, outputs, pods, run: {"pod-a": record})
    monkeypatch.setattr(sources, "pod_logs", lambda pods: pytest.fail("RunPod logs read"))
    snap = cli.collect("dev", Path("."), outputs_of=lambda cwd, stack: OUTPUTS)
    node = snap.nodes[0]
    assert node.exited == "failed" and snap.critical
    assert (
        node.note
        == "start script exited: failed in preflight (exit 1): preflight failed (exit 127); see above"
    )
    assert node.log_tail[-1].endswith("FATAL: preflight failed (exit 127); see above")
    assert not any("aggregator" in p for p in snap.problems)
    console = Console(width=200, record=True)
    console.print(render(snap))
    text = console.export_text()
    assert "EXITED (failed)" in text and "torchrun: command not found" in text and "unknown" not in text
    assert snap.to_json()["nodes"][0]["exited"] == "failed"


def test_a_running_node_without_an_exit_record_is_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_state(stack: str, outputs: object, run: object) -> dict[str, object]:
        raise sources.NoStateError("node 0 (pod-a) answered but has no state")

    monkeypatch.setattr(sources, "aggregator_state", no_state)
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    snap = cli.collect("dev", Path("."), outputs_of=lambda cwd, stack: OUTPUTS)
    assert snap.nodes[0].exited == "" and snap.nodes[0].reachable is None and not snap.critical
    assert snap.problems == ("aggregator: node 0 (pod-a) answered but has no state",)


def test_a_view_asks_a_node_that_did_not_answer_once() -> None:
    """ViewSsh: a node that did not answer (UnreachableError) is not asked again in the same view; one that
    answered, or whose command failed once connected, is asked each time."""
    asked: list[str] = []

    def run(target: SshTarget, command: str) -> str:
        asked.append(target.alias)
        if target.alias == "pod-b":
            raise UnreachableError("ssh to root@h:22 failed 3 times in 10 s")
        if target.alias == "pod-c":
            raise DeliveryError("ssh on root@h:23 exited 1: cat: permission denied")
        return "ok"

    view = sources.ViewSsh(run=run)
    targets = {a: SshTarget("h", 22, "root", a, Path("/dev/null")) for a in ("pod-a", "pod-b", "pod-c")}
    for _ in range(3):
        assert view(targets["pod-a"], "cat x") == "ok"
        with pytest.raises(UnreachableError, match="failed 3 times in 10 s"):
            view(targets["pod-b"], "cat x")
        with pytest.raises(DeliveryError, match="permission denied"):
            view(targets["pod-c"], "cat x")
    assert asked.count("pod-a") == 3 and asked.count("pod-c") == 3
    assert asked.count("pod-b") == 1  # its deadline waited out once, not three times
