"""A local RunPod with hosts that is stopped and started again over its state (issue 25): its hosts went with
the old server, and secret values were only in its memory, so what was running reads as lost and the secrets
as gone; nothing reads RUNNING with nothing on it. Recreated, a pod gets a host again with its secret filled.

The stack-level half (refresh, then `up` recreating lost pods, a lost cluster and secrets) is the repair path
of tests/hosts/test_local_cluster.py and tests/e2e/test_restart.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator import hostnet
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.emulator.conftest import cluster_body, gql, pod_body
from tests.polling import poll

pytestmark = [pytest.mark.serial, pytest.mark.root]

SECRET_VALUE = "hf_restart_test_value_7c1e"  # what the host's env must show, and no log may
CREATE_SECRET = "mutation C($input: SecretCreateInput!) { secretCreate(input: $input) { id name } }"
LOOKUP_SECRETS = "query { myself { secrets { id name } } }"


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: hosts are network namespaces"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install openssh-client)"
    return hostnet.unavailable_reason()


@pytest.fixture
def key(tmp_path: Path) -> Path:
    if why := _missing():
        pytest.skip(why)
    path = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture
def servers() -> Iterator[list[LocalRunPod]]:
    started: list[LocalRunPod] = []
    yield started
    for server in started:
        server.stop()


def _start(state: Path, key: Path, servers: list[LocalRunPod]) -> LocalRunPod:
    server = start_local_runpod(state, *FAST_ARGS, "--hosts", "on", "--graphql", "on")  # its secret store
    servers.append(server)
    with server.client() as api:  # account keys are stored: a restarted server keeps them too
        api.put("/v2/account/ssh-keys", json={"keys": [key.with_suffix(".pub").read_text().strip()]})
    return server


def _ssh_ready(api: httpx.Client, pod_id: str) -> dict[str, Any] | None:
    pod: dict[str, Any] = api.get(f"/v2/pods/{pod_id}").json()
    return pod if pod.get("ssh", {}).get("direct") else None


def _ssh(key: Path, pod: dict[str, Any], command: str) -> subprocess.CompletedProcess[str]:
    direct = pod["ssh"]["direct"]
    argv = ["ssh", "-i", str(key), "-oBatchMode=yes", "-oStrictHostKeyChecking=no"]
    argv += ["-oUserKnownHostsFile=/dev/null", "-oLogLevel=ERROR", "-p", str(direct["port"])]
    return subprocess.run(
        [*argv, f"root@{direct['host']}", command], capture_output=True, text=True, timeout=30, check=False
    )


def _pod_with_secret(api: httpx.Client) -> str:
    body = pod_body(startSsh=True, env={"HF_TOKEN": "{{ RUNPOD_SECRET_hf_token }}"})
    made = api.post("/v2/pods", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _namespaces(bridge: str) -> list[str]:
    return hostnet.list_namespaces(f"ts-{bridge}-")


def test_a_restarted_server_reads_its_running_pods_as_lost_and_recreated_ones_get_hosts(
    tmp_path: Path, key: Path, servers: list[LocalRunPod]
) -> None:
    state = tmp_path / "runpod"
    first = _start(state, key, servers)
    with first.client() as api:
        made = gql(api, CREATE_SECRET, input={"name": "hf_token", "value": SECRET_VALUE})
        assert "errors" not in made, made
        pod_id = _pod_with_secret(api)
        cluster = api.post("/v2/clusters", json=cluster_body()).json()
        stopped_id = str(api.post("/v2/pods", json=pod_body("kept", startSsh=True)).json()["id"])
        poll(lambda: _ssh_ready(api, stopped_id), "the pod to stop, running", 30, 0.1)
        stop = api.post(f"/v2/pods/{stopped_id}/action", json={"action": "stop"})
        assert stop.status_code in (200, 204), stop.text
        pod = poll(lambda: _ssh_ready(api, pod_id), "the pod's SSH endpoint", 30, 0.1)
        assert _ssh(key, pod, 'echo "$HF_TOKEN"').stdout.strip() == SECRET_VALUE
        members = api.get(f"/v2/clusters/{cluster['id']}/pods").json()
        poll(
            lambda: len(first.admin.hosts()["hosts"]) == 3,
            "hosts of the pod and both cluster members",
            30,
            0.1,
        )
    bridge = first.admin.hosts()["bridge"]
    since = first.admin.audit()[-1]["seq"]
    first.stop()
    assert _namespaces(bridge) == []  # the hosts went with the server

    second = _start(state, key, servers)
    assert second.admin.hosts()["bridge"] == bridge  # the same address slot, free again
    with second.client() as api:
        assert api.get(f"/v2/pods/{pod_id}").status_code == 404
        member_ids = {m["id"] for m in (members.get("pods") if isinstance(members, dict) else members)}
        assert len(member_ids) == 2
        for member in member_ids:
            assert api.get(f"/v2/pods/{member}").status_code == 404
        assert api.get(f"/v2/pods/{stopped_id}").json()["status"] == "EXITED"  # halted: kept
        assert api.get(f"/v2/clusters/{cluster['id']}").status_code == 404  # no member left: lost whole
        assert gql(api, LOOKUP_SECRETS)["data"]["myself"]["secrets"] == []
        audit = second.admin.audit(since)
        events = [(e["event"], e["resourceId"]) for e in audit if e["event"].endswith(".lost")]
        lost = {ident for event, ident in events if event == "pod.lost"}
        assert lost == {pod_id, *member_ids}, events
        assert [event for event, _ in events].count("secret.lost") == 1, events
        assert ("cluster.lost", cluster["id"]) in events
        assert second.admin.hosts()["hosts"] == [] and _namespaces(bridge) == []

        # What a refresh and `up` do next: the secret and the pod again; the host has the value.
        made = gql(api, CREATE_SECRET, input={"name": "hf_token", "value": SECRET_VALUE})
        assert "errors" not in made, made
        again = _pod_with_secret(api)
        pod = poll(lambda: _ssh_ready(api, again), "the new pod's SSH endpoint", 30, 0.1)
        assert _ssh(key, pod, 'echo "$HF_TOKEN"').stdout.strip() == SECRET_VALUE

    logs = (state / "emulator.log").read_text(errors="replace")
    assert "read as lost" in logs and pod_id in logs
    assert SECRET_VALUE not in logs
    assert SECRET_VALUE not in "".join(p.read_text(errors="replace") for p in state.glob("*.json"))
