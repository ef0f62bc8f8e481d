"""One rule table, two evaluators: the aggregator's alerts and Prometheus' fire alike on the same series.

Each scenario is a run of rounds built from the aggregator's own fixtures (test_evaluate.healthy, RULES).
The aggregator evaluates it round by round; the same samples become `promtool test rules` input series
(one sample a minute, the rule group's interval) and, per minute and per alert, the alerts the aggregator
had firing are the alerts promtool must find firing, labels and summary included.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.cachedir import cache_dir
from stackconfig.alerts import prometheus_rules
from train.monitor.evaluate import Evaluator
from train.monitor.rules import AlertRules
from train.monitor.ruletable import BY_NAME, RULES_TABLE, promql
from train.monitor.scrape import _GPU_SERIES, _NODE_SERIES, NodeSample

from .test_evaluate import RULES, T0, healthy

STACK = "parity"
DOWN = NodeSample(node="rank-0", time=0, error="agent unreachable (ConnectionRefusedError)")

Scenario = tuple[AlertRules, list[list[NodeSample]]]
SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "healthy": lambda: (RULES, [[healthy(step=10 + i)] for i in range(12)]),
    "util_low_for_5_min": lambda: (
        replace(RULES, util_low_for_s=300),
        [[healthy(step=i, gpu_util={"0": 0.5, "1": 0.9})] for i in range(1, 9)]
        + [[healthy(step=i)] for i in range(9, 12)],
    ),
    "stalled": lambda: (RULES, [[healthy(step=5)] for _ in range(13)] + [[healthy(step=6)]]),
    "idle_memory": lambda: (
        replace(RULES, memory_idle_for_s=120),
        [[healthy(step=i, gpu_mem_used={"0": 2e9, "1": 60e9})] for i in range(4)],
    ),
    "xid_and_ecc": lambda: (
        RULES,
        [
            [healthy(step=10, gpu_xid={"0": 2, "1": 0})],
            [healthy(step=11, gpu_xid={"0": 3, "1": 0})],
            [healthy(step=12, gpu_xid={"0": 3, "1": 0}, gpu_ecc_uncorrected={"0": 0, "1": 1})],
        ],
    ),
    "nvme_and_busbw": lambda: (
        replace(RULES, min_busbw_gb_per_s=100),
        [[healthy(step=i, nvme_write_p99_s=250e-6, busbw_bytes_per_s=40e9)] for i in range(2)],
    ),
    "hot_then_unreachable": lambda: (
        RULES,
        [[healthy(gpu_temp={"0": 90.0, "1": 70.0})], [DOWN], [DOWN], [DOWN], [healthy(step=11)]],
    ),
}


def _series(rounds: list[list[NodeSample]]) -> dict[str, list[str]]:
    """Every series the table reads, one value a minute (`_`: not scraped that round)."""
    out: dict[str, list[str]] = {}

    def put(name: str, minute: int, value: float) -> None:
        out.setdefault(name, ["_"] * len(rounds))[minute] = repr(float(value))

    for minute, samples in enumerate(rounds):
        for s in samples:
            base = f'stack="{STACK}",node="{s.node}"'
            put(f'up{{{base},job="trainstack-agent"}}', minute, 1 if s.ok else 0)
            for d in RULES_TABLE:
                sources = [(d.metric, d.sample, d.matcher)] if d.sample else []
                if d.denominator is not None:
                    sources.append((d.denominator[0], d.denominator[1], ""))
                for metric, attr, matcher in sources:
                    labels = base + (f",{matcher}" if matcher else "")
                    value: Any = getattr(s, attr)
                    if isinstance(value, dict):
                        for gpu, v in value.items():
                            put(f'{metric}{{{labels},gpu="{gpu}"}}', minute, v)
                    elif value is not None:
                        put(f"{metric}{{{labels}}}", minute, value)
    return out


def _firing_by_minute(
    rules: AlertRules, rounds: list[list[NodeSample]]
) -> list[set[tuple[str, str, str | None]]]:
    ev = Evaluator(rules, T0)
    firing = []
    for minute, samples in enumerate(rounds):
        ev.evaluate(samples, T0 + 60 * minute)
        firing.append(set(ev.firing))
    return firing


def _expected(rule: str, node: str, gpu: str | None) -> dict[str, Any]:
    d = BY_NAME[rule]
    labels = {"severity": d.severity, "stack": STACK, "rule": d.name, "node": node}
    if gpu is not None:
        labels["gpu"] = gpu
    if d.kind == "up":
        labels["job"] = "trainstack-agent"
    if d.matcher:
        key, value = d.matcher.split("=")
        labels[key] = value.strip('"')
    where = f" on {node}" + (f" GPU {gpu}" if gpu is not None else "")
    return {"exp_labels": labels, "exp_annotations": {"summary": d.summary + where, "advice": d.advice}}


def promtool() -> Path:
    """scripts/bootstrap unpacks it from Debian's prometheus package into the cache."""
    binary = cache_dir() / "promtool" / "promtool"
    if not binary.exists():
        pytest.skip(f"{binary} is missing: scripts/bootstrap installs promtool (Debian's prometheus package)")
    return binary


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_promtool_fires_what_the_aggregator_fires(name: str, tmp_path: Path) -> None:
    rules, rounds = SCENARIOS[name]()
    firing = _firing_by_minute(rules, rounds)
    alerts = [d for d in RULES_TABLE if promql(d, rules, STACK) is not None]
    cases = [
        {
            "eval_time": f"{minute}m",
            "alertname": d.alert,
            "exp_alerts": [_expected(*key) for key in sorted(now, key=str) if key[0] == d.name],
        }
        for minute, now in enumerate(firing)
        for d in alerts
    ]
    if name != "healthy":
        assert any(c["exp_alerts"] for c in cases), "the scenario fires nothing in the aggregator"
    (tmp_path / "alerts.rules.yml").write_text(prometheus_rules(rules, STACK))
    test = {
        "rule_files": ["alerts.rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": " ".join(v)} for k, v in _series(rounds).items()],
                "alert_rule_test": cases,
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    for args in (["check", "rules", "alerts.rules.yml"], ["test", "rules", "test.yml"]):
        proc = subprocess.run(
            [str(promtool()), *args], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_table_series_is_one_the_scraper_reads() -> None:
    """The table's series and sample attributes are the scraper's (so both evaluators read one figure)."""
    read = {**_GPU_SERIES, **_NODE_SERIES, "trainstack_storage_write_latency_seconds": "nvme_write_p99_s"}
    for d in RULES_TABLE:
        pairs = [(d.metric, d.sample)] + ([d.denominator[:2]] if d.denominator else [])
        for metric, attr in pairs:
            if attr:
                assert read.get(metric) == attr, f"{d.name}: {metric} is not read into NodeSample.{attr}"
