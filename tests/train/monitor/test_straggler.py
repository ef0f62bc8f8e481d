"""The continuous straggler check (train/monitor/straggler.py): behind the others' median for long enough."""

from __future__ import annotations

from train.monitor.straggler import Sample, stragglers

MIN = 60.0


def rounds(times: list[float], slow: dict[int, float], gemm: dict[int, float] | None = None) -> list[Sample]:
    return [Sample(t * MIN, {0: 1.0, 1: 1.02, 2: 0.98, 3: 1.0, **slow}, gemm) for t in times]


def test_a_node_behind_for_the_whole_window_is_named() -> None:
    [s] = stragglers(rounds([0, 5, 10], {3: 1.5}), tolerance_pct=20, for_s=10 * MIN)
    assert (s.rank, s.measure, round(s.behind_pct)) == (3, "step time", 50)
    assert s.line() == "node 3: step time 50% behind the other nodes' median"


def test_too_short_or_within_tolerance_or_recovered_is_not_a_straggler() -> None:
    assert stragglers(rounds([5, 10], {3: 1.5}), 20, 10 * MIN) == []  # 5 min only
    assert stragglers(rounds([0, 5, 10], {3: 1.15}), 20, 10 * MIN) == []  # 15 % < 20 %
    recovered = [*rounds([0, 5], {3: 1.5}), *rounds([10], {})]
    assert stragglers(recovered, 20, 10 * MIN) == []  # the newest round is fine again
    assert stragglers([Sample(0, {0: 1.0})], 20, 0) == []  # one node has nobody to be behind


def test_a_slow_gemm_rate_counts_too() -> None:
    gemm = {0: 700.0, 1: 710.0, 2: 690.0, 3: 450.0}
    [s] = stragglers(rounds([0, 10], {}, gemm), 20, 10 * MIN)
    assert (s.rank, s.measure) == (3, "GEMM rate")
