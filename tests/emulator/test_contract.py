"""Property-based contract run: schemathesis drives RunPod's own openapi-v2.json against the emulator."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.config import default_spec_path
from emulator.spec import Spec
from harness.local import LocalRunPod, start_local_runpod

# Every operation the emulator implements; the rest of the spec (serverless, templates, billing...) is not.
IMPLEMENTED = [
    "listPods",
    "createPod",
    "getPod",
    "updatePod",
    "deletePod",
    "podAction",
    "listClusters",
    "createCluster",
    "getCluster",
    "updateCluster",
    "deleteCluster",
    "listClusterPods",
    "listNetworkVolumes",
    "createNetworkVolume",
    "getNetworkVolume",
    "updateNetworkVolume",
    "deleteNetworkVolume",
    "listGpuTypes",
    "getGpuType",
    "listDataCenters",
    "getDataCenter",
    "getSshKeys",
    "updateSshKeys",
    "listRegistries",
    "createRegistry",
    "getRegistry",
    "deleteRegistry",
    "getPodLogs",
    "listPodBilling",
    "listClusterBilling",
    "listNetworkVolumeBilling",
]
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
    "response_schema_conformance,negative_data_rejection,ignored_auth,use_after_free,ensure_resource_availability"
)
# positive_data_acceptance is left out on purpose: random GPU ids and data centers are valid JSON but
# RunPod answers them with 400 (a rule violation), and so does the emulator.
MAX_EXAMPLES = "60"


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    """Limits lifted so generated creates exercise the happy path instead of the spend limit."""
    server = start_local_runpod(
        tmp_path_factory.mktemp("contract"),
        *("--rate-per-minute", "10000000", "--spend-limit", "100000000", "--balance", "1000000000"),
    )
    yield server
    server.stop()


def test_unimplemented_operations_answer_501(roomy: LocalRunPod) -> None:
    spec = Spec(default_spec_path())
    assert set(IMPLEMENTED) <= {op.operation_id for op in spec.operations}
    with roomy.client() as api:
        assert api.get("/v2/templates").status_code == 501
        assert api.get("/v2/serverless").status_code == 501


def fixed_ids(server: LocalRunPod) -> dict[str, str]:
    """Real ids for the by-id operations, so generated bodies reach the rules instead of a 404."""
    with server.client() as api:
        pod = {"name": "target", "image": "img", "gpu": {"id": "NVIDIA H100 80GB HBM3"}, "ports": ["22/tcp"]}
        ids = {"pod": api.post("/v2/pods", json=pod).json()["id"]}
        ids["acted"] = api.post("/v2/pods", json=pod).json()["id"]
        volume = {"name": "target", "size": 10, "dataCenter": "US-TX-3"}
        ids["volume"] = api.post("/v2/network-volumes", json=volume).json()["id"]
        cluster = {
            "name": "target",
            "type": "TRAINING",
            "image": "img",
            "compute": {"gpuTypeId": "NVIDIA H100 80GB HBM3", "gpuCountPerPod": 8, "podCount": 2},
        }
        ids["cluster"] = api.post("/v2/clusters", json=cluster).json()["id"]
    return ids


def config_file(path: Path, ids: dict[str, str]) -> Path:
    targets = {"updatePod": "pod", "podAction": "acted", "updateNetworkVolume": "volume",
               "updateCluster": "cluster", "listClusterPods": "cluster"}  # fmt: skip
    blocks = [
        f'[[operations]]\ninclude-operation-id = "{op}"\nparameters = {{ "path.id" = "{ids[kind]}" }}\n'
        for op, kind in targets.items()
    ]
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def schemathesis(server: LocalRunPod, cwd: Path, operations: list[str], *extra: str) -> str:
    selection = [arg for op in operations for arg in ("--include-operation-id", op)]
    command = [
        str(Path(sys.executable).with_name("schemathesis")), *extra, "run", str(default_spec_path()),
        "--url", server.base_url, "-H", f"Authorization: Bearer {server.api_key}", *selection,
        "--checks", CHECKS, "--max-examples", MAX_EXAMPLES, "--seed", "1", "--generation-database", "none",
        "--no-color", "--workers", "2",
    ]  # fmt: skip
    run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert f"Tested: {len(operations)}" in run.stdout
    return run.stdout


def test_schemathesis_finds_no_contract_violation(roomy: LocalRunPod, tmp_path: Path) -> None:
    schemathesis(roomy, tmp_path, IMPLEMENTED)


def test_schemathesis_on_live_targets(roomy: LocalRunPod, tmp_path: Path) -> None:
    """Generated bodies against real ids, so they reach the rules instead of a 404.

    A separate run without the delete operations: schemathesis learns ids from responses and would
    otherwise delete the targets early.
    """
    config = config_file(tmp_path / "schemathesis.toml", fixed_ids(roomy))
    targeted = ["updatePod", "podAction", "updateNetworkVolume", "updateCluster", "listClusterPods"]
    schemathesis(roomy, tmp_path, targeted, "--config-file", str(config))
    endpoints = roomy.admin.counters()["endpoints"]
    assert endpoints["PATCH /v2/pods/{id}"].get("200", 0) > 0, endpoints["PATCH /v2/pods/{id}"]
    assert endpoints["PATCH /v2/network-volumes/{id}"].get("200", 0) > 0
