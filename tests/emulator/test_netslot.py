"""Two local RunPods on one machine: each claims its own address slot (bridge, cluster subnets, pod range),
and a pod whose host cannot be made turns ERROR at once instead of reading RUNNING forever."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from emulator.app import create_app
from emulator.config import Settings
from emulator.hosts import HostSpec
from emulator.netslot import SLOTS, NetSlot, claim
from emulator.pods import create_pod
from emulator.views import pod_view
from tests.emulator.conftest import pod_body


def test_slots_never_share_a_subnet() -> None:
    zero, five = NetSlot(0), NetSlot(5)
    assert zero.pod_net_gateway == "100.65.0.1" and zero.cluster_cidr(1) == "10.64.1.0/24"  # RunPod's ranges
    assert (zero.bridge_name, zero.bridge_cidr) == ("tsbr0", "10.250.0.1/24")
    nets = {
        s: [ipaddress.ip_network(NetSlot(s).cluster_cidr(q)) for q in range(256)]
        + [ipaddress.ip_network(f"{NetSlot(s).pod_net_gateway}/16", strict=False)]
        + [ipaddress.ip_interface(NetSlot(s).bridge_cidr).network]
        for s in (0, 5)
    }
    assert not any(a.overlaps(b) for a in nets[0] for b in nets[5])
    assert five.owns_pod_ip(five.pod_ip(12345)) and not zero.owns_pod_ip(five.pod_ip(12345))
    # No pod is ever given the gateway's address.
    assert all(zero.pod_ip(d) != zero.pod_net_gateway for d in range(0, 70000, 7))
    assert zero.pod_ip(0) != zero.pod_net_gateway


def test_claims_are_exclusive_preferred_first_and_released(tmp_path: Path) -> None:
    first = claim(directory=tmp_path)
    second = claim(directory=tmp_path)
    assert (first.slot.index, second.slot.index) == (0, 1)
    third = claim(preferred=7, directory=tmp_path)
    assert third.slot.index == 7
    first.release()
    # Given back: left to the state that used it while any untouched slot is free, then taken by it.
    assert claim(directory=tmp_path).slot.index == 2
    assert claim(preferred=0, directory=tmp_path).slot.index == 0


def test_a_claim_whose_server_is_gone_is_taken_over(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (tmp_path / "netslot-0").write_text(gone.stdout)  # a server that was killed left its claim behind
    (tmp_path / "netslot-2").write_text(gone.stdout)
    # Another server leaves them to their own states while any slot is free (those ask for theirs first).
    assert claim(directory=tmp_path).slot.index == 1
    assert claim(preferred=2, directory=tmp_path).slot.index == 2  # its own state's slot: taken over
    for _ in range(3, SLOTS):
        claim(directory=tmp_path)
    assert claim(directory=tmp_path).slot.index == 0  # none free: the stale claim is taken over


def test_on_a_machine_whose_every_slot_was_used_a_restart_still_gets_its_slot_back(tmp_path: Path) -> None:
    """Claims stay (a stop gives its slot back as 0), so after hours of suites every slot has a file. A
    server stopped a moment ago (slot 0) keeps its addresses while another starts in its gap: the newcomer
    takes the claim given back longest ago (CI: the old rule took the lowest given-back slot, the restarted
    server's, and it came back on another bridge)."""
    for index in range(SLOTS):
        path = tmp_path / f"netslot-{index}"
        path.write_text("0\n")
        os.utime(path, (1_000_000 + index, 1_000_000 + index))  # given back in turn, 63 last
    stopped = tmp_path / "netslot-0"
    os.utime(stopped, (2_000_000, 2_000_000))  # the server of slot 0 stopped last, a moment ago
    assert claim(directory=tmp_path).slot.index == 1  # given back longest ago
    assert claim(preferred=0, directory=tmp_path).slot.index == 0  # the restarted server: its own slot
    assert claim(directory=tmp_path).slot.index == 2


def test_all_slots_held_says_what_to_do(tmp_path: Path) -> None:
    for _ in range(SLOTS):
        claim(directory=tmp_path)
    with pytest.raises(RuntimeError, match="scripts/local-runpod stop"):
        claim(directory=tmp_path)


class SyncedHosts:
    """A host backend that makes a host only in a sync, as the real one does, for every pod (`fits`) or for
    none: what a subnet held by another emulator's bridge used to cause."""

    enabled = True

    def __init__(self, fits: bool) -> None:
        self.fits = fits
        self.asked: list[str] = []

    def describe(self) -> dict[str, Any]:
        return {"enabled": True, "hosts": []}

    def sync(self, wanted: Sequence[HostSpec], volumes: Collection[str], keys: Sequence[str]) -> None:
        self.asked += [s.pod_id for s in wanted]

    def endpoint(self, pod_id: str) -> tuple[str, int] | None:
        return ("10.0.0.2", 22) if self.fits and pod_id in self.asked else None

    def failure(self, pod_id: str) -> str | None:
        if self.fits or pod_id not in self.asked:
            return None
        return "subnet 100.65.0.0/16 is already on tsbr0 (100.65.0.1/16); another emulator's hosts?"

    def signal(self, pod_id: str, sig: int) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_pod_that_gets_no_host_is_error_at_once(tmp_path: Path) -> None:
    _, world = create_app(Settings(state_dir=tmp_path, time_scale=0, hosts="off"))
    hosts = SyncedHosts(fits=False)
    world.hosts = hosts
    pod = create_pod(world, pod_body(globalNetworking=True))
    world.clock.advance(15)  # provisioning + starting: RUNNING by the clock alone
    # Until a sync has tried to make its host, the pod is not read as RUNNING (the race a slow machine lost).
    assert pod_view(world, world.pods[pod.id])["status"] == "STARTING"
    world.sync_hosts()
    view = pod_view(world, world.pods[pod.id])
    assert hosts.asked == [pod.id]
    assert view["status"] == "ERROR" and view["runtime"] is None and view["cost"] == 0.0
    errors = [e for e in world.store.audit_since(0, 1000) if e["event"] == "pod.error"]
    assert [e["resourceId"] for e in errors] == [pod.id]
    assert "already on tsbr0" in errors[0]["detail"]["reason"]
    world.sync_hosts()  # an ERROR pod is not asked for again
    assert hosts.asked == [pod.id]


def test_a_pod_reads_running_once_its_host_is_up_not_when_the_clock_says(tmp_path: Path) -> None:
    _, world = create_app(Settings(state_dir=tmp_path, time_scale=0, hosts="off"))
    hosts = SyncedHosts(fits=True)
    world.hosts = hosts
    pod = create_pod(world, pod_body(globalNetworking=True))
    assert pod.id not in hosts.asked and pod_view(world, world.pods[pod.id])["status"] == "PROVISIONING"
    world.clock.advance(15)
    assert pod_view(world, world.pods[pod.id])["status"] == "STARTING"  # the clock's RUNNING, no host yet
    world.sync_hosts()
    assert hosts.asked[-1] == pod.id
    assert pod_view(world, world.pods[pod.id])["status"] == "RUNNING"
