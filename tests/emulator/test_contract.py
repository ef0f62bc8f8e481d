"""Property-based contract run: schemathesis drives RunPod's own openapi-v2.json against the emulator."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.config import default_spec_path
from emulator.spec import Spec
from harness.local import LocalRunPod, start_local_runpod

pytestmark = pytest.mark.services

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
    "response_schema_conformance,negative_data_rejection,positive_data_acceptance,ignored_auth,"
    "use_after_free,ensure_resource_availability"
)
# Every phase, stateful included (schemathesis links creates to the by-id operations from responses).
PHASES = "examples,coverage,fuzzing,stateful"
# Modest on purpose: the whole contract module must stay a few minutes of the CI's 45.
MAX_EXAMPLES = "25"
H100 = "NVIDIA H100 80GB HBM3"
# Data centers that stock the H100 SXM and offer global networking, so any generated combination of
# GPU, data center and `globalNetworking` is placeable (see restricted_spec).
PLACEABLE_DCS = ["US-TX-3", "US-KS-2", "EU-RO-1"]


def runpods_spec(path: Path) -> Path:
    """RunPod's spec with one fix: it types the SSE stream of getPodLogs as a string, and schemathesis
    checks each parsed event (an object) against that, which no server can pass. The events' shape is
    checked in test_account_endpoints.py."""
    doc = json.loads(default_spec_path().read_text(encoding="utf-8"))
    _any_sse_event(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _no_empty_query_lists(doc: dict[str, Any]) -> None:
    """`?x=` reads as one empty item here (an enum miss, 422) though it could also mean the empty list:
    keep the positive generator off that ambiguity."""
    for item in doc["paths"].values():
        for op in item.values():
            for param in op.get("parameters", []) if isinstance(op, dict) else []:
                schema = param.get("schema", {})
                if param.get("in") == "query" and schema.get("type") == "array":
                    schema["minItems"] = max(1, schema.get("minItems", 0))


def _any_sse_event(doc: dict[str, Any]) -> None:
    logs = doc["paths"]["/v2/pods/{id}/logs"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    logs["schema"] = {}


def restricted_spec(path: Path) -> Path:
    """RunPod's spec narrowed to what the catalog holds, so generated valid requests reach the happy path.

    positive_data_acceptance expects schema-valid requests to be accepted; RunPod refuses many of them with
    400 for rules the schema cannot state (unknown GPU or data center ids, an image that is no reference,
    a CUDA version no machine has, both mount kinds, lastN with startTime). Each narrowing below removes one
    such rule from the generator's reach; the rules themselves are tested in test_spec_rules.py.
    """
    doc = json.loads(default_spec_path().read_text(encoding="utf-8"))
    schemas, paths = doc["components"]["schemas"], doc["paths"]
    # Request-only copies, so responses (which echo whatever earlier requests and the spec's own
    # examples created) are still checked against RunPod's unnarrowed schemas.
    ref = "#/components/schemas/"
    base = copy.deepcopy(schemas["BaseContainerConfig"])
    base["properties"]["image"] = {"type": "string", "enum": ["runpod/pytorch:2.8.0"]}
    base["properties"]["ports"] = {
        "type": "array",
        "items": {"type": "string", "enum": ["22/tcp", "8888/http"]},
    }
    base["properties"]["disk"] |= {"maximum": 500}
    schemas["RequestBaseContainerConfig"] = base
    schemas["RequestContainerConfig"] = {
        "allOf": [{"$ref": ref + "RequestBaseContainerConfig"}, schemas["ContainerConfig"]["allOf"][1]]
    }
    mounts = copy.deepcopy(schemas["Mounts"])
    mounts["properties"].pop("network")  # a random volume id does not exist
    schemas["RequestMounts"] = mounts
    gpu = schemas["CreateGpuConfig"]["allOf"][1]["properties"]
    gpu.pop("allowedCudaVersions")
    gpu["minCudaVersion"] = {"type": "string", "enum": ["12.4"]}
    gpu["id"] = {"type": "string", "enum": [H100]}
    gpu["count"] = {"type": "integer", "minimum": 1, "maximum": 8}
    pod = schemas["CreatePodRequest"]
    pod["allOf"][0] = {"$ref": ref + "RequestContainerConfig"}
    pod["allOf"][1]["properties"].pop("cpu")  # CPU pods are not offered
    pod["allOf"][1]["required"] = ["name", "gpu"]
    pod["allOf"][1]["properties"]["dataCenterIds"]["items"] = {"type": "string", "enum": PLACEABLE_DCS}
    pod["allOf"][1]["properties"]["mounts"] = {"$ref": ref + "RequestMounts"}
    update = schemas["UpdatePodRequest"]
    update["allOf"][0] = {"$ref": ref + "RequestContainerConfig"}
    update["allOf"][1]["properties"].pop("mounts")  # the mount kind is fixed at create
    compute = copy.deepcopy(schemas["ClusterCompute"])
    compute["properties"]["gpuTypeId"] = {"type": "string", "enum": [H100]}
    compute["properties"]["gpuCountPerPod"] |= {"maximum": 8}
    compute["properties"]["podCount"] |= {"maximum": 4}
    schemas["RequestClusterCompute"] = compute
    cluster = schemas["CreateClusterRequest"]
    cluster["allOf"][0] = {"$ref": ref + "RequestBaseContainerConfig"}
    cluster["allOf"][1]["required"] = ["name", "type", "compute", "image"]
    cluster["allOf"][1]["properties"]["compute"] = {"$ref": ref + "RequestClusterCompute"}
    cluster["allOf"][1]["properties"]["mounts"] = {"$ref": ref + "RequestMounts"}
    cluster["allOf"][1]["properties"]["dataCenterIds"]["items"] = {"type": "string", "enum": PLACEABLE_DCS}
    volume = schemas["CreateNetworkVolumeRequest"]["properties"]
    volume["dataCenter"] = {"type": "string", "enum": PLACEABLE_DCS}
    volume["type"] = {"type": "string", "enum": ["STANDARD"]}
    schemas["UpdateNetworkVolumeRequest"]["properties"]["size"] = {"type": "integer", "const": 4096}
    for template in ("/v2/catalog/gpus", "/v2/catalog/gpus/{id}"):
        paths[template]["get"].pop("parameters", None)  # include/product/CUDA rules: test_spec_rules
    for template in ("/v2/billing/pods", "/v2/billing/clusters", "/v2/billing/network-volumes"):
        params = paths[template]["get"]["parameters"]
        paths[template]["get"]["parameters"] = [p for p in params if not p.get("$ref", "").endswith("LastN")]
    _any_sse_event(doc)
    _no_empty_query_lists(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    """Limits lifted so generated creates exercise the happy path instead of the spend limit."""
    server = start_local_runpod(
        tmp_path_factory.mktemp("contract"),
        *("--rate-per-minute", "10000000", "--spend-limit", "100000000", "--balance", "1000000000"),
    )
    server.admin.capacity(stock={f"{H100}@{dc}": 10**7 for dc in PLACEABLE_DCS})
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


def schemathesis(
    server: LocalRunPod, cwd: Path, operations: list[str], *extra: str, restricted: bool = False
) -> str:
    """One run: RunPod's full spec with every check but positive_data_acceptance (negative data must be
    refused by what RunPod's schemas say), or with `restricted` the narrowed spec, positive data only,
    positive_data_acceptance on (narrowing makes some RunPod-valid data "negative" to schemathesis)."""
    selection = [arg for op in operations for arg in ("--include-operation-id", op)]
    if restricted:
        # Stateful links may carry RunPod-valid values the narrowed spec excludes (a listed GPU id into a
        # create): those count as "negative" here but are valid, so negative data is judged by the full run.
        spec, mode = restricted_spec(cwd / "openapi-v2.restricted.json"), "positive"
        checks = CHECKS.replace("negative_data_rejection,", "")
    else:
        spec, mode = runpods_spec(cwd / "openapi-v2.json"), "all"
        checks = CHECKS.replace(",positive_data_acceptance", "")
    command = [
        str(Path(sys.executable).with_name("schemathesis")), *extra, "run", str(spec), "--phases", PHASES,
        "--mode", mode, "--url", server.base_url, "-H", f"Authorization: Bearer {server.api_key}",
        *selection, "--checks", checks, "--max-examples", MAX_EXAMPLES, "--seed", "1",
        "--generation-database", "none", "--no-color",
        # One worker: two threads of schemathesis parse lambdas with ast.parse at once, which CPython 3.11.7
        # (the machines' Python) can fail with "SystemError: AST constructor recursion depth mismatch".
        "--workers", "1",
    ]  # fmt: skip
    run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    (cwd / f"schemathesis-{mode}.out").write_text(run.stdout + run.stderr, encoding="utf-8")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert f"Tested: {len(operations)}" in run.stdout
    assert "Stateful" in run.stdout  # the stateful phase ran
    return run.stdout


def test_schemathesis_finds_no_contract_violation(roomy: LocalRunPod, tmp_path: Path) -> None:
    roomy.admin.reset()
    schemathesis(roomy, tmp_path, IMPLEMENTED)
    endpoints = roomy.admin.counters()["endpoints"]
    assert not [(e, s) for e, c in endpoints.items() for s in c if s.startswith("5")]  # 0 server errors


def test_valid_requests_over_the_catalog_are_accepted(roomy: LocalRunPod, tmp_path: Path) -> None:
    """positive_data_acceptance and the stateful phase over the spec narrowed to the catalog's ids."""
    roomy.admin.reset()
    roomy.admin.capacity(stock={f"{H100}@{dc}": 10**7 for dc in PLACEABLE_DCS})
    schemathesis(roomy, tmp_path, IMPLEMENTED, restricted=True)
    created = roomy.admin.counters()["endpoints"]["POST /v2/pods"]
    assert created.get("201", 0) > 0 and not [k for k in created if k.startswith("5")], created


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
