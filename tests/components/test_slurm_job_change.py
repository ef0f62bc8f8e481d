"""A second job on a Slurm cluster is a config change, not a new cluster (`trainstack:cluster.slurm.job`):
under Pulumi mocks the cluster is declared with the same inputs, and each node's delivery changes, which its
provider's diff reads as an update in place (delivery re-delivers and restarts the submitter, which
`sbatch`es the new job). The e2e is tests/hosts/test_slurm_stack.py."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components import slurm
from components.cluster import H100Cluster, H100ClusterArgs
from providers.delivery.node_files import NodeFilesProvider
from stackconfig.config import StackConfig
from stackconfig.slurm import SlurmConfig
from tests.components.conftest import stack_config
from tests.components.test_cluster import CLUSTER, NODE_FILES, SECRET_VALUES, FakeProviders

STACK = "local-cpu"


def _config(job: str | None) -> StackConfig:
    config = stack_config(STACK)
    cluster = config.cluster.model_copy(update={"scheduler": "slurm", "slurm": SlurmConfig(job=job)})
    return config.model_copy(update={"cluster": cluster})


def _declared(job: str | None) -> dict[str, dict[str, Any]]:
    """name -> inputs of every resource the component declares for this job."""
    fake = FakeProviders()
    pulumi.runtime.set_mocks(fake, preview=False)
    seen: dict[str, dict[str, Any]] = {}

    @pulumi.runtime.test
    def declare() -> Any:
        config = _config(job)
        secrets = {k: pulumi.Output.secret(SECRET_VALUES[k]) for k in config.training.secrets}
        declared = H100Cluster(STACK, H100ClusterArgs(config, secrets, "http://127.0.0.1:9000"))

        def keep(_ids: Any) -> None:
            seen.update({r.name: {**r.inputs, "__type": r.typ} for r in fake.resources})

        return pulumi.Output.all(*[d.id for d in declared.deliveries]).apply(keep)

    declare()
    return seen


def test_a_new_job_updates_the_deliveries_and_leaves_the_cluster_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("components.delivery.control_plane_only_reason", lambda *_args: None)
    first, second = _declared(None), _declared("second")
    assert set(first) == set(second)  # no resource added or removed: the same cluster, the same deliveries
    clusters = [n for n, r in first.items() if r["__type"] == CLUSTER]
    assert len(clusters) == 1 and first[clusters[0]] == second[clusters[0]]  # nothing to diff: no replace
    provider = NodeFilesProvider()
    deliveries = sorted(n for n, r in first.items() if r["__type"] == NODE_FILES)
    assert len(deliveries) == 2
    for name in deliveries:
        old, new = first[name]["files"], second[name]["files"]
        assert f"--job-name={STACK}" in old[slurm.SBATCH] and "--job-name=second" in new[slurm.SBATCH]
        olds = {k: v for k, v in first[name].items() if k != "__type"}
        news = {k: v for k, v in second[name].items() if k != "__type"}
        diff = provider.diff(f"{name}-id", olds, news)
        assert diff.changes and not diff.replaces, (name, diff.replaces)
