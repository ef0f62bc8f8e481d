"""State survives a restart; `--offer-spot` offers spot again from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.local import FAST_ARGS, start_local_runpod
from tests.emulator.conftest import H100, cluster_body, gql, pod_body

pytestmark = pytest.mark.services

RENT = "mutation Rent($input: PodRentInterruptableInput!) { podRentInterruptable(input: $input) { id } }"


def test_restart_keeps_resources_limits_and_audit(tmp_path: Path) -> None:
    first = start_local_runpod(tmp_path, *FAST_ARGS, "--graphql", "on", "--offer-spot")
    try:
        with first.client() as api:
            pod = api.post("/v2/pods", json=pod_body()).json()
            cluster = api.post("/v2/clusters", json=cluster_body()).json()
            volume = api.post(
                "/v2/network-volumes", json={"name": "v", "size": 10, "dataCenter": "US-TX-3"}
            ).json()
            spot = gql(
                api, RENT, input={"bidPerGpu": 2.0, "gpuTypeId": H100, "gpuCount": 1, "imageName": "i"}
            )
            assert spot["data"]["podRentInterruptable"]["id"]
        first.admin.limits(spendLimit=500)
        audit_before = first.admin.audit()
    finally:
        first.stop()
    second = start_local_runpod(tmp_path, *FAST_ARGS)
    try:
        with second.client() as api:
            assert api.get(f"/v2/pods/{pod['id']}").json()["name"] == pod["name"]
            assert api.get(f"/v2/clusters/{cluster['id']}").json()["pods"]["total"] == 2
            assert api.get(f"/v2/network-volumes/{volume['id']}").status_code == 200
        assert second.admin.live()["spendPerHour"] == 3.99 + 63.84 + 2.0
        limits = second.admin.limits()
        assert limits["spendLimit"] == 500 and limits["offerSpot"] is True  # limits persist too
        assert second.admin.audit()[: len(audit_before)] == audit_before
    finally:
        second.stop()


def test_start_flags_for_faults(tmp_path: Path) -> None:
    server = start_local_runpod(tmp_path, *FAST_ARGS, "--no-capacity", "--error-rate", "1", "--seed", "3")
    try:
        with server.client() as api:
            assert api.get("/v2/pods").status_code == 503
            server.admin.faults()  # back to no injected errors
            refused = api.post("/v2/pods", json=pod_body())
            assert refused.status_code == 400 and "no longer any instances" in refused.json()["detail"]
    finally:
        server.stop()
