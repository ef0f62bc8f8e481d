"""`scripts/forecast STACK --compare`: every rented GPU type, node count and sharding, cheapest run first."""

from __future__ import annotations

import json

import pytest

from facts.gpus import GPUS
from forecast.cli import EXIT_BAD_INPUT, EXIT_FITS, main
from forecast.compare import CompareError, compare, rented_gpus, stack_output
from forecast.stack import stack_forecast
from tests.components.conftest import stack_config


def test_prod_tries_every_instant_cluster_gpu_node_count_and_sharding() -> None:
    result = compare(stack_config("prod"))
    assert result is not None
    shapes = {(o.gpu, o.nodes, o.gpus_per_node, o.sharding) for o in result.options}
    cluster_gpus = {g.key for g in GPUS.values() if g.instant_cluster}
    assert cluster_gpus == {"H100_SXM", "H200_SXM", "B200"}
    assert shapes == {
        (g, n, 8, m) for g in cluster_gpus for n in range(2, 9) for m in ("ddp", "zero1", "zero2", "zero3")
    }
    costs = [o.run_usd for o in result.options]
    assert costs == sorted(costs)


def test_the_cheapest_feasible_option_and_its_saving() -> None:
    result = compare(stack_config("prod"))
    assert result is not None and result.cheapest is not None
    feasible = [o for o in result.options if o.verdict == "fits"]
    assert result.cheapest == min(feasible, key=lambda o: o.run_usd)
    assert all(o.run_usd >= result.cheapest.run_usd for o in feasible)
    # The stack as configured is one of the candidates and its figures are its own forecast's.
    own = stack_forecast(stack_config("prod"))
    assert own is not None
    assert result.configured.configured and result.configured.label == "8 x 8 H100_SXM, zero3"
    assert result.configured.run_usd == pytest.approx(own.cost.run_usd)
    assert result.configured.hours == pytest.approx(own.compute.hours)
    assert result.saving_usd == pytest.approx(result.configured.run_usd - result.cheapest.run_usd)


def test_an_option_that_may_not_fit_is_never_the_cheapest_feasible() -> None:
    result = compare(stack_config("prod"))
    assert result is not None and result.cheapest is not None
    cheaper = [o for o in result.options if o.run_usd < result.cheapest.run_usd]
    assert all(o.verdict != "fits" for o in cheaper)
    assert result.cheapest.total_high_gb <= result.cheapest.gpu_gb


def test_a_pool_of_pods_keeps_its_job_count_and_tries_each_pod_size() -> None:
    result = compare(stack_config("search"))
    assert result is not None
    assert {o.nodes for o in result.options} == {4}  # four trials stay four jobs
    assert {o.gpu for o in result.options} == set(GPUS)  # every GPU type rents as pods
    assert {o.gpus_per_node for o in result.options} == {1, 2, 4, 8}


def test_narrowing_to_named_gpus_and_bad_names() -> None:
    cfg = stack_config("prod")
    narrowed = compare(cfg, ["H200_SXM"])
    assert narrowed is not None and {o.gpu for o in narrowed.options} == {"H200_SXM"}
    assert narrowed.configured.gpu == "H100_SXM"  # still the saving's reference
    with pytest.raises(CompareError, match=r"no GPU type 'A100'.*choices: H100_SXM, H200_SXM, B200"):
        compare(cfg, ["A100"])
    with pytest.raises(
        CompareError, match=r"no Instant Cluster of H100_PCIE \(cluster.topology is 'cluster'"
    ):
        compare(cfg, ["H100_PCIE"])
    assert [g.key for g in rented_gpus("cluster")] == ["H100_SXM", "H200_SXM", "B200"]


def test_the_cli_prints_the_table_and_the_cheapest_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod", "--compare"]) == EXIT_FITS
    out = capsys.readouterr().out
    result = compare(stack_config("prod"))
    assert result is not None and result.cheapest is not None
    assert "<- cheapest" in out and "configured" in out
    assert f"cheapest feasible: {result.cheapest.label} ${result.cheapest.run_usd:,.2f}" in out
    assert f"(-${result.saving_usd:,.2f} against 8 x 8 H100_SXM, zero3 $" in out


def test_the_cli_refuses_bad_gpus_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod", "--compare", "H100_PCIE"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--compare H100_PCIE" in err and "choices: H100_SXM, H200_SXM, B200" in err
    assert main(["prod", "--compare", "nope"]) == EXIT_BAD_INPUT
    assert "no GPU type 'nope'" in capsys.readouterr().err


def test_the_cli_json_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod", "--compare", "--json"]) == EXIT_FITS
    doc = json.loads(capsys.readouterr().out)
    assert doc["candidates"] == len(doc["options"]) == 84
    feasible = [o["run_usd"] for o in doc["options"] if o["verdict"] == "fits"]
    assert doc["cheapest_feasible"]["run_cost_usd"] == round(min(feasible), 2)


def test_the_stack_output_carries_the_summary_the_report_prints() -> None:
    out = stack_output(stack_config("prod"))
    assert out is not None
    summary = out["compare"]
    result = compare(stack_config("prod"))
    assert result is not None and result.cheapest is not None
    assert summary["cheapest_feasible"]["gpu"] == result.cheapest.gpu
    assert summary["saving_usd"] == round(result.saving_usd or 0, 2)
    assert stack_output(stack_config("local-cpu")) is None
