"""The actuator reads the stack's nodes through common/outputs.py: a malformed `nodes` output is one line
naming the key, and the action (a release's last sync, a stall's diagnostics) goes on without it."""

from __future__ import annotations

from pathlib import Path

from supervisor.act import Actuator, Recoverer, replaced_ids
from supervisor.model import Plan


def test_a_node_without_its_fabric_ip_is_named_and_the_sync_is_skipped() -> None:
    lines: list[str] = []
    actor = Actuator("dev", Path("."), protect=False, log=lines.append, ssh_run=lambda *_a: "never")
    outputs = {"nodes": [{"rank": 0, "pod_id": "p0", "ssh_endpoint": "127.0.0.1:2222"}]}
    assert actor.sync(outputs) == "sync: none (stack 'dev': nodes[0] has no `ip`; the stack's outputs are " \
        "older or broken: run `scripts/up`)"  # fmt: skip
    recoverer = Recoverer(
        "dev", Path("."), protect=False, topology="cluster", s3=None, bucket="b", log=lines.append
    )
    assert recoverer.diagnose(outputs, now=0.0).startswith(
        "diagnostics: none (stack 'dev': nodes[0] has no `ip`"
    )
    assert len(lines) == 2


def test_a_replace_names_the_cluster_of_the_billed_ids() -> None:
    plan = Plan(kind="node_lost", reason="node 1 lost", act="replace")
    assert replaced_ids({"cluster_id": "c1", "volume_id": None}, plan, "cluster") == ("cluster:c1",)
    assert replaced_ids({"cluster_id": None, "volume_id": "v1"}, plan, "cluster") == ()
