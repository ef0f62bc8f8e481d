"""A RUNNING pod's emulated host comes back when the local RunPod restarts on its saved state (issue 25).

The local RunPod keeps pods in SQLite; stopping it removes every namespace and sshd. Started again on the same
state directory, it must bring the hosts of RUNNING pods back (same address, sshd answering), so a stack
whose pods are RUNNING is still reachable after `scripts/local-runpod stop` / `start`, or a reboot.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator import hostnet
from emulator.hostnet import Bridge
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod

pytestmark = pytest.mark.root
BRIDGE_CIDR = "10.251.78.1/24"  # private, used by nothing else here; created and removed by the fixture
READY_S = 90.0


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    if os.geteuid() != 0:
        pytest.skip("needs root: hosts are network namespaces")
    why = hostnet.unavailable_reason()
    if why is not None:
        pytest.skip(why)
    bridge = Bridge(f"tsr{os.getpid() % 100000}", BRIDGE_CIDR)
    bridge.remove()
    bridge.create()
    try:
        yield bridge
    finally:
        for name in hostnet.list_namespaces(f"ts-{bridge.name}-"):
            hostnet.delete_namespace(name)
        bridge.remove()


def _ssh_endpoint(runpod: LocalRunPod, pod_id: str) -> tuple[str, int] | None:
    with runpod.client() as api:
        pod: dict[str, Any] = api.get(f"/v2/pods/{pod_id}").json()
    direct = (pod.get("ssh") or {}).get("direct")
    if pod.get("status") != "RUNNING" or not direct:
        return None
    return str(direct["host"]), int(direct["port"])


_GREETING = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as sock:
        sys.exit(0 if sock.recv(4).startswith(b"SSH") else 1)  # sshd greets first
except OSError:
    sys.exit(1)
"""


def _answers(endpoint: tuple[str, int]) -> bool:
    # In a child process: the test session only lets this process reach loopback (pytest-socket).
    probe = [sys.executable, "-c", _GREETING, endpoint[0], str(endpoint[1])]
    return subprocess.run(probe, timeout=30, check=False).returncode == 0


def _reachable(runpod: LocalRunPod, pod_id: str) -> tuple[str, int]:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        endpoint = _ssh_endpoint(runpod, pod_id)
        if endpoint is not None and _answers(endpoint):
            return endpoint
        time.sleep(0.2)  # polling the API and the port, not timing the test
    raise AssertionError(f"pod {pod_id}: no answering sshd within {READY_S} s")


def test_running_pods_hosts_come_back_after_a_restart(bridge: Bridge, tmp_path: Path) -> None:
    state = tmp_path / "runpod"
    args = (*FAST_ARGS, "--hosts", "on", "--hosts-bridge", bridge.name)
    first = start_local_runpod(state, *args)
    try:
        with first.client() as api:
            made = api.post(
                "/v2/pods",
                json={"name": "restart-probe", "image": "runpod/pytorch:2.4.0", "cloud": "SECURE",
                      "gpu": {"id": "NVIDIA H100 80GB HBM3", "count": 1}, "globalNetworking": True},
            )  # fmt: skip
            assert made.status_code == 201, made.text
        pod_id = made.json()["id"]
        before = _reachable(first, pod_id)
    finally:
        first.stop()
    assert not _answers(before), "stopping the local RunPod takes its hosts down"

    second = start_local_runpod(state, *args)
    try:
        after = _reachable(second, pod_id)
        assert after[0] == before[0], "the pod's host comes back at its address"
        with second.client() as api:
            assert api.get(f"/v2/pods/{pod_id}").json()["status"] == "RUNNING"
            api.delete(f"/v2/pods/{pod_id}")
    finally:
        second.stop()
