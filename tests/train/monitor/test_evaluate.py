"""Alert rules: each fires once after its duration, stays quiet while firing, resolves once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from train.monitor.evaluate import Evaluator, Money, project
from train.monitor.rules import AlertRules, RulesError
from train.monitor.scrape import NodeSample

# keep_firing_for_s=0: an alert resolves at its first false round (Prometheus' default); keep tests set it.
RULES = AlertRules(
    interval_s=60, stalled_after_s=600, startup_grace_s=600, unreachable_after=2, keep_firing_for_s=0
)
T0 = 1_000_000.0


def healthy(node: str = "rank-0", step: float = 10.0, **kw: object) -> NodeSample:
    base = NodeSample(
        node=node,
        time=0,
        gpu_util={"0": 0.85, "1": 0.88},
        gpu_mem_used={"0": 60e9, "1": 61e9},
        gpu_temp={"0": 70.0, "1": 72.0},
        gpu_xid={"0": 0, "1": 0},
        gpu_ecc_uncorrected={"0": 0, "1": 0},
        nvme_write_p99_s=40e-6,
        step=step,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def rounds(ev: Evaluator, samples_by_minute: list[list[NodeSample]]) -> list[tuple[int, str, str]]:
    out = []
    for minute, samples in enumerate(samples_by_minute):
        for t in ev.evaluate(samples, T0 + 60 * minute):
            out.append((minute, t.state, t.alert.rule))
    return out


def test_a_healthy_run_fires_nothing() -> None:
    ev = Evaluator(RULES, T0)
    assert rounds(ev, [[healthy(step=10 + i)] for i in range(30)]) == []


def test_low_utilisation_fires_after_its_duration_once_and_resolves_once() -> None:
    ev = Evaluator(replace(RULES, util_low_for_s=300), T0)
    low = [[healthy(step=i, gpu_util={"0": 0.5, "1": 0.9})] for i in range(1, 9)]
    ok = [[healthy(step=i)] for i in range(9, 12)]
    assert rounds(ev, low + ok) == [(5, "firing", "gpu_util_low"), (8, "resolved", "gpu_util_low")]


def test_a_dip_shorter_than_the_duration_never_fires() -> None:
    ev = Evaluator(replace(RULES, util_low_for_s=300), T0)
    seq = [
        [healthy(step=i, gpu_util={"0": 0.5, "1": 0.9} if i % 4 else {"0": 0.9, "1": 0.9})] for i in range(20)
    ]
    assert rounds(ev, seq) == []


def test_each_rule_names_node_and_gpu() -> None:
    ev = Evaluator(RULES, T0)
    hot = healthy(node="rank-3 (10.0.0.4)", gpu_temp={"0": 91.0, "1": 70.0})
    [t] = ev.evaluate([hot], T0)
    assert t.alert.rule == "gpu_temperature_high"
    assert t.alert.summary.startswith("rank-3 (10.0.0.4) GPU 0: 91 C")


def test_new_xid_and_ecc_are_critical_and_counted_from_the_first_reading() -> None:
    ev = Evaluator(RULES, T0)
    assert ev.evaluate([healthy(gpu_xid={"0": 2, "1": 0})], T0) == []  # baseline: already there at start
    [t] = ev.evaluate([healthy(step=11, gpu_xid={"0": 3, "1": 0})], T0 + 60)
    assert (t.alert.rule, t.alert.severity, t.alert.gpu) == ("gpu_xid", "critical", "0")
    assert "1 new XID" in t.alert.summary
    [t] = ev.evaluate(
        [healthy(step=12, gpu_xid={"0": 3, "1": 0}, gpu_ecc_uncorrected={"0": 0, "1": 1})], T0 + 120
    )
    assert t.alert.rule == "gpu_ecc_uncorrected" and t.alert.gpu == "1"


def test_stalled_training_fires_once_and_resolves_when_steps_move() -> None:
    ev = Evaluator(RULES, T0)
    seq = [[healthy(step=5)] for _ in range(13)] + [[healthy(step=6)]]
    assert rounds(ev, seq) == [(10, "firing", "training_stalled"), (13, "resolved", "training_stalled")]


def test_no_step_at_all_waits_for_the_startup_grace() -> None:
    ev = Evaluator(replace(RULES, startup_grace_s=1200), T0)
    seq = [[healthy(step=None)] for _ in range(22)]  # type: ignore[arg-type]
    assert rounds(ev, seq) == [(20, "firing", "training_stalled")]


def test_an_unreachable_node_is_critical_after_n_rounds_and_keeps_its_other_alerts() -> None:
    ev = Evaluator(RULES, T0)
    hot = healthy(gpu_temp={"0": 90.0, "1": 70.0})
    down = NodeSample(node="rank-0", time=0, error="agent unreachable (ConnectionRefusedError)")
    seq = [[hot], [down], [down], [down], [replace(hot, step=11)]]
    assert rounds(ev, seq) == [
        (0, "firing", "gpu_temperature_high"),
        (2, "firing", "node_unreachable"),
        (4, "resolved", "node_unreachable"),
    ]


def test_idle_gpu_memory() -> None:
    ev = Evaluator(replace(RULES, memory_idle_for_s=120), T0)
    idle = [[healthy(step=i, gpu_mem_used={"0": 2e9, "1": 60e9})] for i in range(4)]
    assert rounds(ev, idle) == [(2, "firing", "gpu_idle")]


def test_nvme_latency_and_busbw_floor() -> None:
    ev = Evaluator(replace(RULES, min_busbw_gb_per_s=100), T0)
    slow = healthy(nvme_write_p99_s=250e-6, busbw_bytes_per_s=40e9)
    assert sorted(t.alert.rule for t in ev.evaluate([slow], T0)) == ["busbw_low", "nvme_latency_high"]


def test_a_figure_hovering_at_its_threshold_fires_once_and_resolves_once_it_stays_low() -> None:
    ev = Evaluator(replace(RULES, keep_firing_for_s=120), T0)
    p99 = [250, 90, 250, 95, 99, 260, 80, 70, 60, 50]  # us, one round a minute
    seq = [[healthy(step=i, nvme_write_p99_s=us * 1e-6)] for i, us in enumerate(p99)]
    # false at minutes 6, 7 and 8: resolved at 8, the first round it has been false for 120 s
    assert rounds(ev, seq) == [(0, "firing", "nvme_latency_high"), (8, "resolved", "nvme_latency_high")]


def test_a_resolution_waits_keep_firing_for_and_carries_the_last_figure() -> None:
    ev = Evaluator(replace(RULES, keep_firing_for_s=300), T0)
    seq = [[healthy(step=1, nvme_write_p99_s=us * 1e-6)] for us in (300, 228, 40, 40, 40, 40, 40, 40)]
    events = [(m, t.state, t.alert.summary) for m, s in enumerate(seq) for t in ev.evaluate(s, T0 + 60 * m)]
    assert [(m, state) for m, state, _ in events] == [(0, "firing"), (7, "resolved")]
    assert "228 us" in events[1][2]  # what the team last saw while it fired


def test_a_node_back_within_keep_firing_for_is_still_unreachable_then_resolves() -> None:
    ev = Evaluator(replace(RULES, keep_firing_for_s=120), T0)
    down = NodeSample(node="rank-0", time=0, error="agent unreachable (ConnectionRefusedError)")
    up = [healthy(step=1)]
    # back at minute 3 for one round, gone again at 4-5 (unreachable again at 5): one alert, no new message
    seq = [up, [down], [down], up, [down], [down], up, up, up]
    assert rounds(ev, seq) == [(2, "firing", "node_unreachable"), (8, "resolved", "node_unreachable")]


def test_cost_projection_over_budget_is_critical() -> None:
    rules = replace(RULES, cost_per_hour_usd=255.36, budget_usd=3000, total_steps=1000)
    ev = Evaluator(rules, T0)
    # after 2 h, 100 of 1000 steps done: 20 h projected, $5107 > $3000
    money = project(rules, T0, T0 + 7200, 100)
    assert money.spent_usd == pytest.approx(510.72)
    assert money.projected_usd == pytest.approx(5107.2)
    [t] = ev.evaluate([healthy()], T0 + 7200, money)
    assert t.alert.rule == "cost_over_budget" and t.alert.node == ""
    under = Money(10, 255.36, 2000, 3000)
    [t] = ev.evaluate([healthy(step=11)], T0 + 7260, under)
    assert t.state == "resolved"


def test_projection_without_steps_uses_the_planned_hours() -> None:
    rules = replace(RULES, cost_per_hour_usd=100, planned_hours=10)
    assert project(rules, T0, T0 + 3600, None).projected_usd == pytest.approx(1000)
    assert project(rules, T0, T0 + 12 * 3600, None).projected_usd == pytest.approx(1200)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"util_low_ratio": 1.5}, "alerts.util_low_ratio is a ratio"),
        ({"temperature_max_c": float("nan")}, "alerts.temperature_max_c must be a finite number"),
        ({"interval_s": 0}, "alerts.interval_s must be at least 1"),
        ({"unreachable_after": True}, "alerts.unreachable_after must be a finite number"),
        ({"nope": 1}, "alerts.nope is not a known key"),
        ({"util_low_ratio": 0.96}, "must be below alerts.util_high_ratio"),
    ],
)
def test_bad_rules_name_the_key(data: dict[str, object], needle: str) -> None:
    with pytest.raises(RulesError, match=needle.replace(".", r"\.")):
        AlertRules.from_mapping(data)


def test_rules_round_trip_through_json() -> None:
    rules = replace(RULES, budget_usd=123.0)
    assert AlertRules.from_json(rules.to_json()) == rules
