"""The component's real outputs, under the Pulumi mocks of test_cluster.py, parse into common/outputs.py's
records: what the component writes is what every reader reads."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from common.outputs import BilledIds, ForecastOutput, NodeOutput, SshEndpoint, nodes_of
from components.cluster import H100Cluster, H100ClusterArgs
from forecast.compare import stack_output
from tests.components.conftest import stack_config
from tests.components.test_cluster import SECRET_VALUES, FakeProviders


@pytest.fixture
def mocks(monkeypatch: pytest.MonkeyPatch) -> FakeProviders:
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    fake = FakeProviders()
    pulumi.runtime.set_mocks(fake, preview=False)
    return fake


def _declare(stack: str) -> H100Cluster:
    config = stack_config(stack)
    secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
    return H100Cluster(stack, H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))


@pulumi.runtime.test
def test_a_clusters_outputs_parse_into_their_records(mocks: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("prod")

    def check(out: dict[str, Any]) -> None:
        nodes = nodes_of(out)
        assert [n.rank for n in nodes] == list(range(8))
        assert nodes[0] == NodeOutput(
            rank=0, ip="10.65.0.2", pod_id="cpod0", ssh=SshEndpoint("203.0.113.9", 41000)
        )
        assert [n.to_output() for n in nodes] == out["nodes"]
        assert BilledIds.from_output(out["billed_ids"]) == BilledIds(cluster_id="c1", volume_id="vol1")
        assert cluster.forecast is not None
        forecast = ForecastOutput.from_output(cluster.forecast)
        assert forecast.gpus_per_job == 64 and forecast.run_cost_usd > 0
        # every key the forecast package writes is in the record: a new one must be added there first
        assert forecast.to_output() == cluster.forecast == stack_output(stack_config("prod"))

    return pulumi.Output.all(nodes=cluster.nodes, billed_ids=cluster.billed_ids).apply(check)


@pulumi.runtime.test
def test_a_pools_outputs_parse_into_their_records(mocks: FakeProviders) -> pulumi.Output[None]:
    cluster = _declare("dev")

    def check(out: dict[str, Any]) -> None:
        (node,) = nodes_of(out)
        assert (node.pod_id, str(node.ssh)) == ("pod0", "203.0.113.9:40000")
        assert BilledIds.from_output(out["billed_ids"]) == BilledIds(cluster_id=None, volume_id=None)

    return pulumi.Output.all(nodes=cluster.nodes, billed_ids=cluster.billed_ids).apply(check)
