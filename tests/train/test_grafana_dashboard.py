"""The Grafana dashboard that ships (train/monitor/grafana/trainstack-nodes.json) asks only for series the
node agent serves: every metric name in its queries is one a scrape of the agent returns, the scrape taken
from the agent itself on recorded NVML readings, a progress line and the storage probe (issue #68: no
dashboard shipped for the golden metrics)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.train.recorded import node_of
from train.node.agent import Agent, State, StateCollector
from train.node.nvml import GpuReading, ReplaySampler, SamplerError, with_fault
from train.node.progress import ProgressTail, progress_line
from train.node.storage import StorageProbe

DASHBOARD = Path(__file__).resolve().parents[2] / "train/monitor/grafana/trainstack-nodes.json"
NAME = re.compile(r"\btrainstack_[a-z0-9_]+\b")


class FailingSampler:
    def read(self) -> list[GpuReading]:
        raise SamplerError("NVML read failed (GPU is lost)")

    def close(self) -> None:
        return None


def served(tmp_path: Path) -> set[str]:
    """The sample names the agent's scrapes return (counters with their `_total`): one of a node whose NVML
    reads, whose job logs a progress line with its checkpoint time; one of a node whose NVML fails (the
    sampler-error counter appears with its first error)."""
    progress = tmp_path / "progress.jsonl"
    line = progress_line(1200, 0.031, 2.87, samples_per_s=2051.3, tokens_per_s=4.2e6, checkpoint_s=12.5)
    progress.write_text(line)
    names: set[str] = set()
    for sampler in (ReplaySampler([with_fault(node_of(2, "load"), 1, xid_events=(79,))]), FailingSampler()):
        state = State("pod-abc", "3")
        Agent(state, sampler, StorageProbe(tmp_path), ProgressTail(progress), None, io.StringIO()).sample(1.0)
        registry = CollectorRegistry()
        registry.register(StateCollector(state))
        text = generate_latest(registry).decode()
        names |= {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    return names


def queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v.get("type") == "query"]
    return exprs


def test_the_dashboard_asks_only_for_what_the_agent_serves(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    names = {n for expr in queries(dashboard) for n in NAME.findall(expr)}
    have = served(tmp_path)
    assert names - have == set(), f"the dashboard asks for series the agent does not serve: {names - have}"
    # the golden metrics are all on it: progress, GPUs, storage, the agent's own health
    for needed in (
        "trainstack_train_step", "trainstack_train_tokens_per_second", "trainstack_gpu_utilization_ratio",
        "trainstack_gpu_memory_used_bytes", "trainstack_storage_write_latency_seconds",
        "trainstack_gpu_xid_errors_total", "trainstack_agent_nvml_up",
    ):  # fmt: skip
        assert needed in names


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A name the agent does not serve (a DCGM exporter's, say) is caught."""
    assert "DCGM_FI_DEV_GPU_UTIL" not in served(tmp_path)
    assert "trainstack_gpu_util_pct" not in served(tmp_path)


def test_the_dashboard_is_grafana_json_with_unique_panel_ids() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "trainstack-nodes" and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        for target in panel.get("targets", []):
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
