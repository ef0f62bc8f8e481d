"""The component output records of common/outputs.py: each parses what the component writes, and a missing
or malformed key fails with a message that names it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from common.outputs import BilledIds, ContractError, ForecastOutput, NodeOutput, SshEndpoint, nodes_of

NODE = {"rank": 1, "ip": "10.65.0.3", "pod_id": "cpod1", "ssh_endpoint": "203.0.113.9:41001"}
FORECAST: dict[str, Any] = {
    "gpu": "H100_SXM",
    "gpus_per_job": 64,
    "jobs": 1,
    "memory_gb_per_gpu": {
        "weights": 0.25,
        "gradients": 0.25,
        "optimizer": 1.51,
        "activations": 27.86,
        "gather_buffers": 0.81,
        "allowance": 5.07,
        "total": 35.74,
        "total_low": 30.1,
        "total_high": 41.2,
        "gpu": 80.0,
        "headroom": 44.26,
    },
    "fits": True,
    "verdict": "fits",
    "fixes": [],
    "flops": 9.636e20,
    "mfu": 0.2939,
    "hours": 18.7,
    "max_run_hours": 24,
    "restarts": 0,
    "usd_per_hour": 255.52,
    "run_cost_usd": 4778.06,
    "spot_run_cost_usd": None,
    "assumed": ["8 key-value heads (grouped-query attention), the usual shape for the width"],
    "compare": None,
}


def test_a_node_parses_its_ssh_endpoint_once_and_writes_the_same_map_back() -> None:
    node = NodeOutput.from_output({**NODE, "rank": 1.0})  # Pulumi hands numbers over as floats
    assert (node.rank, node.ssh, node.boot) == (1, SshEndpoint("203.0.113.9", 41001), 0)
    assert node.to_output() == NODE
    booted = NodeOutput.from_output({**NODE, "boot": 2})
    assert booted.boot == 2 and booted.to_output() == {**NODE, "boot": 2}


@pytest.mark.parametrize("key", ["rank", "ip", "pod_id", "ssh_endpoint"])
def test_a_node_without_a_key_is_refused_naming_it(key: str) -> None:
    raw = {k: v for k, v in NODE.items() if k != key}
    with pytest.raises(ContractError, match=rf"nodes\[0\] has no `{key}`"):
        nodes_of({"nodes": [raw]})


@pytest.mark.parametrize("text", ["203.0.113.9", ":22", "h:ssh", "h:0", "h:70000", ""])
def test_an_ssh_endpoint_that_is_not_host_port_is_refused(text: str) -> None:
    with pytest.raises(ContractError, match=r"node\.ssh_endpoint is not `host:port`"):
        NodeOutput.from_output({**NODE, "ssh_endpoint": text})


def test_an_ipv6_host_keeps_its_colons() -> None:
    assert SshEndpoint.parse("fd00::2:2222") == SshEndpoint("fd00::2", 2222)


def test_nodes_of_reads_none_as_no_nodes_and_refuses_a_non_list() -> None:
    assert nodes_of({}) == [] and nodes_of({"nodes": None}) == []
    with pytest.raises(ContractError, match=r"outputs\.nodes is not a list"):
        nodes_of({"nodes": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"})  # the engine's unknown, at preview


def test_billed_ids_read_the_component_map_and_the_stack_outputs_alike() -> None:
    ids = BilledIds.from_output({"cluster_id": "c1", "volume_id": None})
    assert ids == BilledIds(cluster_id="c1", volume_id=None)
    assert ids.to_output() == {"cluster_id": "c1", "volume_id": None}
    stack = {"nodes": [NODE], "cluster_id": None, "volume_id": "vol1", "workdir": "/w"}
    assert BilledIds.from_output(stack, "outputs") == BilledIds(cluster_id=None, volume_id="vol1")
    with pytest.raises(ContractError, match="outputs has no `volume_id`"):
        BilledIds.from_output({"cluster_id": "c1"}, "outputs")


def test_a_forecast_round_trips_and_a_missing_figure_is_named() -> None:
    fc = ForecastOutput.from_output(FORECAST)
    assert (fc.run_cost_usd, fc.memory.total_high, fc.verdict) == (4778.06, 41.2, "fits")
    assert fc.to_output() == FORECAST
    old = {k: v for k, v in FORECAST.items() if k != "assumed"}  # written before `assumed` was recorded
    assert ForecastOutput.from_output(old).assumed == ()
    for key in ("run_cost_usd", "gpu", "fits"):
        with pytest.raises(ContractError, match=f"forecast has no `{key}`"):
            ForecastOutput.from_output({k: v for k, v in FORECAST.items() if k != key})
    broken = copy.deepcopy(FORECAST)
    del broken["memory_gb_per_gpu"]["total"]
    with pytest.raises(ContractError, match=r"forecast\.memory_gb_per_gpu has no `total`"):
        ForecastOutput.from_output(broken)
    for bad in ("long", float("nan"), float("inf")):
        with pytest.raises(ContractError, match=r"forecast\.hours is not a finite number"):
            ForecastOutput.from_output({**FORECAST, "hours": bad})


def test_a_forecast_from_before_the_band_still_parses() -> None:
    old = copy.deepcopy(FORECAST)
    for key in ("total_low", "total_high"):
        del old["memory_gb_per_gpu"][key]
    del old["verdict"], old["compare"]
    fc = ForecastOutput.from_output(old)
    assert (fc.memory.total_low, fc.memory.total_high, fc.verdict, fc.compare) == (None, None, None, None)
