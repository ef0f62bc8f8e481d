"""Registry credentials, pod logs and billing (issue #20): shapes from the v2 spec, amounts on the clock."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from emulator.config import default_spec_path
from emulator.spec import Spec
from harness.local import LocalRunPod
from tests.emulator.conftest import H100, cluster_body, pod_body

pytestmark = pytest.mark.services

SPEC = Spec(default_spec_path())


def _valid(schema: str, value: Any) -> None:
    assert SPEC.schema_errors(schema, value) == [], SPEC.schema_errors(schema, value)


def test_registry_credentials_are_write_only_and_guarded(rp: LocalRunPod, api: httpx.Client) -> None:
    made = api.post("/v2/registries", json={"name": "ghcr", "username": "bot", "password": "pw-do-not-leak"})
    assert made.status_code == 201 and made.json().keys() == {"id", "name"}
    _valid("Registry", made.json())
    rid = made.json()["id"]
    listed = api.get("/v2/registries").json()
    _valid("ListRegistriesResponse", listed)
    assert listed["registries"] == [{"id": rid, "name": "ghcr"}]
    assert api.get(f"/v2/registries/{rid}").json() == {"id": rid, "name": "ghcr"}
    pod = api.post("/v2/pods", json=pod_body(registry=rid)).json()
    refused = api.delete(f"/v2/registries/{rid}")  # "Rejected if any pod currently uses this credential"
    assert refused.status_code == 400 and pod["id"] in refused.json()["detail"]
    api.delete(f"/v2/pods/{pod['id']}")
    assert api.delete(f"/v2/registries/{rid}").status_code == 204
    assert api.get(f"/v2/registries/{rid}").status_code == 404
    assert api.get("/v2/registries/delegations").status_code == 501  # ECR delegations: not emulated
    stored = b"".join(p.read_bytes() for p in rp.state_dir.rglob("*") if p.is_file())
    assert b"pw-do-not-leak" not in stored and "pw-do-not-leak" not in str(rp.admin.audit())


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    found = []
    for block in response.text.strip().split("\n\n"):
        if not block:
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["id"], json.loads(lines["data"])))
    return found


def test_pod_logs_stream_the_lifecycle_with_resumable_ids(rp: LocalRunPod, api: httpx.Client) -> None:
    pod = api.post("/v2/pods", json=pod_body()).json()["id"]
    rp.admin.advance(30)
    running = _events(api.get(f"/v2/pods/{pod}/logs"))
    assert [e["line"] for _, e in running] == ["create", "RUNNING"]
    api.post(f"/v2/pods/{pod}/action", json={"action": "stop"})
    events = _events(api.get(f"/v2/pods/{pod}/logs"))
    assert [e["line"] for _, e in events] == ["create", "stop"]
    assert all(e["source"] == "system" and e["ts"].endswith("Z") for _, e in events)
    first_id = events[0][0]
    assert first_id.startswith(events[0][1]["ts"] + "/")  # the id is the event's ts (plus a sequence)
    resumed = _events(api.get(f"/v2/pods/{pod}/logs", headers={"Last-Event-ID": first_id}))
    assert [e for _, e in resumed] == [e for _, e in events[1:]]
    assert len(_events(api.get(f"/v2/pods/{pod}/logs", params={"tail": 1}))) == 1
    assert _events(api.get(f"/v2/pods/{pod}/logs", params={"source": "container"})) == []  # no host here
    assert api.get(f"/v2/pods/{pod}/logs", params={"tail": 5001}).status_code == 422
    assert api.get("/v2/pods/nope/logs").status_code == 404


def test_pod_billing_accrues_by_bucket_and_stops_with_the_pod(rp: LocalRunPod, api: httpx.Client) -> None:
    pod = api.post("/v2/pods", json=pod_body(gpu={"id": H100, "count": 2})).json()["id"]
    rp.admin.advance(3 * 3600)
    api.post(f"/v2/pods/{pod}/action", json={"action": "stop"})
    rp.admin.advance(2 * 3600)  # stopped: no GPU charge, and no container disk (RunPod wipes it)
    hourly = api.get("/v2/billing/pods", params={"bucketSize": "hour", "lastN": 8}).json()
    _valid("ListPodBillingResponse", hourly)
    gpu = sum(r["gpuAmount"] for r in hourly["records"])
    assert gpu == pytest.approx(3 * 2 * 3.99, abs=0.01)  # 3 h x 2 GPUs x $3.99
    assert all(r["podId"] == pod for r in hourly["records"])
    assert hourly["metadata"]["uniquePodCount"] == 1
    assert hourly["metadata"]["totals"]["gpuAmount"] == pytest.approx(gpu, abs=1e-4)
    disk = hourly["metadata"]["totals"]["diskAmount"]
    assert disk == pytest.approx(3 * 50 * 0.10 / 730, rel=0.01)  # 50 GB container disk, the 3 h it ran
    daily = api.get("/v2/billing/pods", params={"podId": pod}).json()
    assert daily["metadata"]["query"]["bucketSize"] == "day" and daily["metadata"]["query"]["podId"] == pod
    assert sum(r["totalAmount"] for r in daily["records"]) == pytest.approx(gpu + disk, abs=0.01)
    both = {"lastN": 2, "startTime": "2026-01-01T00:00:00Z"}
    assert api.get("/v2/billing/pods", params=both).status_code == 400


def test_a_stopped_pod_bills_only_its_volume_disk_at_the_stopped_rate(
    rp: LocalRunPod, api: httpx.Client
) -> None:
    mounts = {"persistent": {"size": 40, "path": "/workspace"}}
    pod = api.post("/v2/pods", json=pod_body(mounts=mounts, disk=20)).json()["id"]
    api.post(f"/v2/pods/{pod}/action", json={"action": "stop"})
    before = api.get("/v2/billing/pods", params={"podId": pod}).json()["metadata"]["totals"]
    rp.admin.advance(10 * 3600)
    after = api.get("/v2/billing/pods", params={"podId": pod}).json()["metadata"]["totals"]
    assert after["gpuAmount"] == pytest.approx(before["gpuAmount"], abs=1e-9)  # no GPU while stopped
    # 40 GB of volume disk at $0.20/GB-month for 10 h; the 20 GB container disk bills nothing.
    assert after["diskAmount"] - before["diskAmount"] == pytest.approx(10 * 40 * 0.20 / 730, rel=0.01)
    assert api.get(f"/v2/pods/{pod}").json()["cost"] == 0


def test_cluster_and_volume_billing(rp: LocalRunPod, api: httpx.Client) -> None:
    cluster = api.post("/v2/clusters", json=cluster_body()).json()["id"]
    volume = api.post(
        "/v2/network-volumes", json={"name": "v", "size": 1500, "dataCenter": "US-TX-3"}
    ).json()["id"]
    rp.admin.advance(3600)
    clusters = api.get("/v2/billing/clusters", params={"bucketSize": "hour", "lastN": 2}).json()
    _valid("ListClusterBillingResponse", clusters)
    assert {r["clusterId"] for r in clusters["records"]} == {cluster}
    assert clusters["metadata"]["totals"]["gpuAmount"] == pytest.approx(16 * 3.99, abs=0.01)
    assert api.get("/v2/billing/pods", params={"bucketSize": "hour", "lastN": 2}).json()["records"] == []
    volumes = api.get("/v2/billing/network-volumes", params={"networkVolumeId": volume}).json()
    _valid("ListNetworkVolumeBillingResponse", volumes)
    hourly = (1000 * 0.07 + 500 * 0.05) / 730  # first TB at $0.07/GB-month, the rest at $0.05
    assert volumes["metadata"]["totals"]["standardAmount"] == pytest.approx(hourly, rel=0.01)
    assert volumes["metadata"]["uniqueNetworkVolumeCount"] == 1


def test_the_bill_of_a_run_covers_the_clusters_its_recoveries_replaced(
    rp: LocalRunPod, api: httpx.Client
) -> None:
    """Issue #29: after a recovery recreated the Instant Cluster, RunPod still bills the old one under its own
    id. stackview/sources.billed_usd reads it from the local RunPod (the same contract as RunPod's) when told
    the replaced ids, as the supervisor does from its recovery records, so the run's bill is whole."""
    from providers.runpod.client import RunPodClient
    from stackview import sources

    rp.admin.limits(spendLimit=300)  # two 16-GPU clusters at once
    other = api.post("/v2/clusters", json=cluster_body(name="someone-else")).json()["id"]
    first = api.post("/v2/clusters", json=cluster_body()).json()["id"]
    rp.admin.advance(3600)
    assert api.delete(f"/v2/clusters/{first}").status_code in (200, 204)
    made = api.post("/v2/clusters", json=cluster_body())
    assert made.status_code in (200, 201), made.text
    second = made.json()["id"]
    rp.admin.advance(1800)
    outputs = {"cluster_id": second, "nodes": []}

    def bill(cluster: str) -> float:
        body = api.get("/v2/billing/clusters", params={"clusterId": cluster}).json()
        return float(body["metadata"]["totals"]["totalAmount"])

    current_only = sources.billed_usd(outputs, client=RunPodClient(rp.base_url, rp.api_key))
    replaced = (f"cluster:{first}",)
    whole = sources.billed_usd(outputs, client=RunPodClient(rp.base_url, rp.api_key), replaced=replaced)
    assert bill(first) > 0 and bill(other) > 0
    assert current_only == pytest.approx(bill(second), abs=1e-6)
    assert whole == pytest.approx(bill(first) + bill(second), abs=1e-6)  # the other cluster is not ours
