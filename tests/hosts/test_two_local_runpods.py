"""Two local RunPods with hosts on one machine (the demo's left by `scripts/up` and the tests' own, or two
checkouts) each get their own bridge and subnets, and both clusters come up; a pod whose subnet is taken
turns ERROR within seconds instead of waiting out a client's readiness timeout."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator import hostnet
from emulator.hostnet import Bridge
from emulator.netslot import NetSlot
from emulator.store import Store
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.emulator.conftest import cluster_body, pod_body
from tests.polling import poll

pytestmark = [pytest.mark.serial, pytest.mark.root]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: hosts are network namespaces"
    return hostnet.unavailable_reason()


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[LocalRunPod, LocalRunPod]]:
    if why := _missing():
        pytest.skip(why)
    # No --hosts-bridge: each server takes a bridge and address slot of its own (emulator/netslot.py).
    first = start_local_runpod(tmp_path / "a", *FAST_ARGS, "--hosts", "on")
    try:
        second = start_local_runpod(tmp_path / "b", *FAST_ARGS, "--hosts", "on")
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _up(server: LocalRunPod) -> dict[str, Any]:
    with server.client() as api:
        cluster = api.post("/v2/clusters", json=cluster_body()).json()
        api.post("/v2/pods", json=pod_body(globalNetworking=True)).raise_for_status()
    return dict(cluster)


def _errored_at_once(server: LocalRunPod, cluster: dict[str, Any]) -> None:
    """The cluster's members go to ERROR without ever being read as RUNNING, within the poll's deadline
    (counted from the cluster's create, not from before it as a stopwatch was)."""
    seen: set[str] = set()  # every status the members were read with, until both were ERROR
    with server.client() as api:

        def errored() -> list[str] | None:
            pods = [
                p
                for p in api.get("/v2/pods", params={"includeClusterPods": "true"}).json()["pods"]
                if p["name"].startswith(cluster["name"])
            ]
            seen.update(p["status"] for p in pods)
            return [p["status"] for p in pods] if pods and all(p["status"] == "ERROR" for p in pods) else None

        assert poll(errored, "cluster members ERROR", 20, 0.1) == ["ERROR", "ERROR"]
    assert "RUNNING" not in seen, seen


def test_two_servers_each_have_their_own_bridge_and_subnets(two: tuple[LocalRunPod, LocalRunPod]) -> None:
    clusters = [_up(server) for server in two]

    def three_hosts(server: LocalRunPod) -> dict[str, Any] | None:
        found = server.admin.hosts()
        return found if len(found["hosts"]) == 3 else None

    hosts = [poll(lambda s=s: three_hosts(s), "3 hosts each", 30, 0.1) for s in two]
    assert hosts[0]["bridge"] != hosts[1]["bridge"]
    assert [h["failed"] for h in hosts] == [[], []]
    nets = [ipaddress.ip_network(c["network"]["cidr"]) for c in clusters]
    assert not nets[0].overlaps(nets[1])
    ips = [{ipaddress.ip_address(h["ip"]) for h in s["hosts"]} for s in hosts]
    assert not ips[0] & ips[1]
    for server in two:
        with server.client() as api:
            assert {
                p["status"] for p in api.get("/v2/pods", params={"includeClusterPods": "true"}).json()["pods"]
            } == {"RUNNING"}


def test_a_pod_whose_subnet_is_taken_is_error_at_once(two: tuple[LocalRunPod, LocalRunPod]) -> None:
    server = two[0]
    bridge = server.admin.hosts()["bridge"]
    slot = int(bridge.removeprefix("tsbr"))
    # What another machine user or a stale emulator might hold: the subnet of this server's next cluster.
    taken = f"10.{64 + slot}.1.1/24"
    holder = Bridge(f"tstaken{os.getpid() % 10000}", taken)
    holder.remove()  # a leftover of a killed run with the same pid
    holder.create()
    try:
        cluster = _up(server)
        assert cluster["network"]["cidr"] == f"10.{64 + slot}.1.0/24"
        _errored_at_once(server, cluster)
        failed = server.admin.hosts()["failed"]
        reasons = " ".join(f["error"] for f in failed) + " ".join(
            str(e["detail"]) for e in server.admin.audit() if e["event"] == "pod.error"
        )
        assert f"subnet 10.{64 + slot}.1.0/24 is already on {holder.name}" in reasons
        assert f"delete it: ip link del {holder.name}" in reasons  # the way out, if it is a killed run's
    finally:
        holder.remove()


def test_a_killed_servers_gateways_do_not_outlive_it(tmp_path: Path) -> None:
    """A local RunPod SIGKILLed with a cluster up leaves its slot's bridge holding that cluster's gateway. The
    next server to take the slot (the claim is stale) starts from its own state: it removes that address, so
    a subnet someone else holds is still seen as taken instead of read as already configured on our bridge
    (the flake of the test above after another hosts test's server had been killed)."""
    if why := _missing():
        pytest.skip(why)
    killed = start_local_runpod(tmp_path / "killed", *FAST_ARGS, "--hosts", "on")
    try:
        name = killed.admin.hosts()["bridge"]
        bridge = Bridge(name, NetSlot(int(name.removeprefix("tsbr"))).bridge_cidr)
        cluster = _up(killed)
        gateway = str(ipaddress.ip_network(cluster["network"]["cidr"])[1])
        poll(
            lambda: any(a.startswith(f"{gateway}/") for a in bridge.extra_addresses()) or None,
            "gateway up",
            30,
        )
    finally:
        killed.process.kill()
        killed.process.wait()
        killed.admin.client.close()
    slot = int(bridge.name.removeprefix("tsbr"))
    taken = Bridge(f"tstaken{os.getpid() % 10000}", f"10.{64 + slot}.1.1/24")
    taken.remove()
    # A new state that last used the killed server's slot (a server asks for its state's slot first), so the
    # slot is taken over here whatever other servers on this machine hold meanwhile.
    seeded = Store(tmp_path / "next")
    seeded.set_setting("net_slot", slot)
    seeded.close()
    server = None
    try:
        server = start_local_runpod(tmp_path / "next", *FAST_ARGS, "--hosts", "on")
        assert server.admin.hosts()["bridge"] == bridge.name  # the killed server's slot, taken over
        assert bridge.extra_addresses() == []
        taken.create()
        mine = _up(server)
        assert mine["network"]["cidr"] == f"10.{64 + slot}.1.0/24"
        _errored_at_once(server, mine)
    finally:
        taken.remove()
        if server is not None:
            server.stop()
        # What the killed server left, if the next one did not start or did not clean it up.
        for stale in hostnet.list_namespaces(f"ts-{bridge.name}-"):
            hostnet.delete_namespace(stale)
        hostnet.ip("link", "del", bridge.name, check=False)
