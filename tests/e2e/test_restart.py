"""The local demo survives a restart (issue 25): scripts/up, stop, start, scripts/up converges with 0 orphans.

Runs the shipped scripts as a new user would, with a state directory, workspaces and backend of its own.
The control-plane cases share one local RunPod and moto (issue #47: a boot of their own each bought nothing);
each takes down what it put up, but prod, which the prod case leaves converged for the S3 endpoint case to go
on from and take down with scripts/down. The case with emulated hosts has its own. The local RunPod keeps its
SQLite state across the restart, moto keeps nothing: the second scripts/up notices the restart, refreshes,
and recreates what is gone. With moto's old port taken by something else, its endpoint changes, and the
checkpoint bucket is updated in place, never replaced. With emulated hosts (as root), the running cluster
reads as lost after the restart; the second up makes it anew and writes each new node's secrets file.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from emulator import hostnet
from harness.local import FAST_ARGS
from harness.pulumi_cli import REPO, run_killing_tree
from tests.e2e.reliability import Report
from tests.e2e.test_demo_trains import read_bucket, trains, watch_snapshot

# Restarts of the servers, in the parallel lane; the hosts case (an 8-host cluster that trains) is serial. A
# restart gives the local RunPod and moto back the ports they had "when free"; beside other work another
# process can take a port the kernel hands out (a server's, a client's) in the gap (CI saw the port move and
# "address already in use"), so the servers here start on ports below the kernel's ephemeral range
# (`last_ports`, at random), which nothing else asks for.
pytestmark = [pytest.mark.e2e]
# Below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default): no bind to
# port 0 and no outgoing connection is ever given one of these.
_QUIET_PORTS = range(20000, 32000)
_ID_KEYS = ("pod_id", "cluster_id", "volume_id", "secret_id")
# What the hosts case asks of its nodes is to exist, be lost and be made again, not to train: their start
# scripts (settings overridable from the environment, components/render.py) run no metrics agent, log their
# bucket transfers instead of running them, and their job is 20 steps (issue #47: the demo's 8 nodes trained,
# synced and served metrics through the rest of the case).
_IDLE_NODES = ("--hosts-env", "TRAINSTACK_METRICS_PORT=0", "--hosts-env", "TRAINSTACK_DRY_RUN=1")


class Demo:
    """scripts/up and scripts/local-runpod with their state in `tmp`."""

    def __init__(self, tmp: Path, hosts: str = "off") -> None:
        self.tmp = tmp
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "PULUMI_"))}
        self.env = keep | {
            "TRAINSTACK_STATE_DIR": str(tmp / "local-runpod"),
            "TRAINSTACK_LOCAL_WORKSPACES": str(tmp / "ws"),
            "TRAINSTACK_OUT_DIR": str(tmp / "out"),
            "PULUMI_BACKEND_URL": f"file://{tmp / 'backend'}",
            "PULUMI_CONFIG_PASSPHRASE": "test-only-passphrase",
            "TRAINSTACK_POLL_INTERVAL_S": "0.2",
            # Control-plane only unless a test asks for hosts (the demo's default as root).
            "LOCAL_RUNPOD_ARGS": " ".join((*FAST_ARGS, "--hosts", hosts)),
        }
        (tmp / "backend").mkdir()
        self.ws = tmp / "ws"
        self.left_up: set[str] = set()  # stacks a case left up and converged for the next case to take
        self._endpoints: dict[str, str] | None = None  # `scripts/local-runpod env` since the last script

    def last_ports(self) -> None:
        """Seed the state's last ports (localcloud/servers.py: a server takes its last port when free) with
        free ones that no other process is given meanwhile; moto's only without hosts, where it listens on
        loopback (with hosts, on the bridge's address, not known before the start)."""
        state = Path(self.env["TRAINSTACK_STATE_DIR"])
        state.mkdir(parents=True, exist_ok=True)
        servers = ("emulator",) if "--hosts on" in self.env["LOCAL_RUNPOD_ARGS"] else ("emulator", "moto")
        for name, port in zip(servers, _free_quiet_ports(len(servers)), strict=True):
            (state / f"{name}.last").write_text(f"127.0.0.1:{port}\n")

    def idle(self) -> None:
        """Hosts that a later `scripts/local-runpod start` makes run _IDLE_NODES and a 20-step job."""
        self.env["LOCAL_RUNPOD_ARGS"] = " ".join((*FAST_ARGS, "--hosts", "on", *_IDLE_NODES))
        self.env["TRAINSTACK_STEPS"] = "20"  # the demo's job (scripts/local-runpod's DEMO_NODE_ENV): 2 s

    def watch(self, stack: str) -> dict[str, Any]:
        return watch_snapshot(self.env, stack)  # tests/e2e/test_demo_trains.py's `trains` asks it

    def bucket(self, bucket: str, prefix: str) -> tuple[list[str], str]:
        return read_bucket(self.env | self.endpoints(), bucket, prefix)

    def run(self, *argv: str, timeout: float = 600) -> str:
        self._endpoints = None  # any script may start, stop or restart the servers: read them again after it
        done = run_killing_tree([str(REPO / argv[0]), *argv[1:]], timeout, env=self.env, cwd=REPO)
        assert done.returncode == 0, (
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
        return done.stdout + done.stderr

    def endpoints(self) -> dict[str, str]:
        """The servers' endpoints, as `scripts/local-runpod env` prints them; read once after each script
        (each read is a Python process, and most of the cases' reads came between the same two scripts)."""
        if self._endpoints is None:
            lines = self.run("scripts/local-runpod", "env").splitlines()
            exports = (line.removeprefix("export ") for line in lines if line.startswith("export "))
            self._endpoints = dict(line.split("=", 1) for line in exports)
        return dict(self._endpoints)

    def pulumi(self, stack: str, *args: str) -> str:
        argv = ["bash", "-c", '. scripts/env.sh && exec pulumi "$@"', "pulumi", *args]
        env = self.env | self.endpoints()
        done = run_killing_tree(
            [*argv, "--stack", stack, "--cwd", str(self.ws / stack), "--non-interactive"],
            300,
            env=env,
            cwd=REPO,
        )
        assert done.returncode == 0, f"pulumi {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def orphans(self, stack: str) -> list[str]:
        known: set[str] = set()
        for res in json.loads(self.pulumi(stack, "stack", "export"))["deployment"].get("resources") or []:
            known.add(str(res.get("id", "")))
            known.update(str((res.get("outputs") or {}).get(k)) for k in _ID_KEYS)
        live: dict[str, Any] = httpx.get(
            f"{self.endpoints()['RUNPOD_API_URL']}/_admin/live", timeout=10
        ).json()
        ids = {p["id"]: p["name"] for p in live["pods"] if not p.get("clusterId")}
        for kind in ("clusters", "volumes", "secrets"):
            ids.update({r["id"]: r["name"] for r in live[kind]})
        return sorted(f"{name} ({rid})" for rid, name in ids.items() if rid not in known)

    def buckets(self) -> list[str]:
        env = self.endpoints()
        s3 = boto3.client(
            "s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"], region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing", verify=env["AWS_CA_BUNDLE"],
        )  # fmt: skip
        return sorted(b["Name"] for b in s3.list_buckets().get("Buckets", []))


def _free_quiet_ports(count: int) -> list[int]:
    """`count` ports of _QUIET_PORTS that are free now, picked at random (two checkouts' suites apart)."""
    found: list[int] = []
    for port in random.sample(_QUIET_PORTS, 200):
        with socket.socket() as s, contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            found.append(port)
        if len(found) == count:
            return found
    raise AssertionError(f"no {count} free ports in {_QUIET_PORTS}")


def _hosts_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: emulated hosts are network namespaces"
    return hostnet.unavailable_reason()


def _stop(d: Demo) -> None:
    run_killing_tree([str(REPO / "scripts/local-runpod"), "stop"], 120, env=d.env)


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The control-plane local RunPod and moto the module's cases share; each case restarts them itself."""
    d = Demo(tmp_path_factory.mktemp("restart"))
    d.last_ports()
    yield d
    for stack in sorted(d.left_up):  # a case that failed before its scripts/down
        run_killing_tree([str(REPO / "scripts/down"), stack], 600, env=d.env, cwd=REPO)
    _stop(d)


@pytest.fixture
def demo(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Demo]:
    hosts = getattr(request, "param", "off")
    if hosts == "off":
        yield request.getfixturevalue("control_plane")
        return
    if why := _hosts_missing():
        pytest.skip(why)
    d = Demo(tmp_path, hosts)
    d.last_ports()
    yield d
    _stop(d)


def _restart(demo: Demo, block_moto_port: bool = False) -> dict[str, str]:
    before = demo.endpoints()
    demo.run("scripts/local-runpod", "stop")
    with socket.socket() as squatter:
        if block_moto_port:  # another program took moto's port while the demo was down
            host, port = before["AWS_ENDPOINT_URL_S3"].split("://", 1)[1].rsplit(":", 1)
            # as a server would: past the last run's connections in TIME_WAIT, and listening, so it holds it
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind((host, int(port)))
            squatter.listen()
        demo.run("scripts/local-runpod", "start")
    return before


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_up_stop_start_up_converges_with_no_orphans(stack: str, demo: Demo, report: Report) -> None:
    demo.run("scripts/up", stack)
    assert demo.orphans(stack) == []
    before = _restart(demo)
    after = demo.endpoints()
    # On the seeded ports (Demo.last_ports), which nothing beside this test is handed in the restart's gap.
    urls = (before["RUNPOD_API_URL"], before["AWS_ENDPOINT_URL_S3"])
    assert all(int(url.rsplit(":", 1)[1].strip("/")) in _QUIET_PORTS for url in urls), urls
    # Stable endpoints per checkout: both servers came back on their ports.
    assert (after["RUNPOD_API_URL"], after["AWS_ENDPOINT_URL_S3"]) == (
        before["RUNPOD_API_URL"],
        before["AWS_ENDPOINT_URL_S3"],
    )
    assert demo.buckets() == []  # moto keeps nothing across a restart

    second = demo.run("scripts/up", stack)
    assert "refreshing first" in second
    orphaned = demo.orphans(stack)
    assert orphaned == []
    report.record(
        f"restart: scripts/up `{stack}`, local RunPod and moto stopped and started, scripts/up",
        "same ports; the second up saw the restart, refreshed and converged (empty moto: bucket recreated)",
        orphaned,
        [],
        runs=2,
    )
    if stack == "prod":
        assert demo.buckets() == ["trainstack-prod-checkpoints"]  # recreated, not wedged
    demo.pulumi(stack, "preview", "--expect-no-changes")
    if stack == "prod":  # converged: the S3 endpoint case goes on from here, and takes it down
        demo.left_up.add(stack)
        return
    demo.pulumi(stack, "state", "unprotect", "--all", "--yes")
    demo.pulumi(stack, "destroy", "--yes", "--skip-preview")


def test_a_new_s3_endpoint_after_a_restart_updates_the_bucket_in_place(demo: Demo, report: Report) -> None:
    if "prod" not in demo.left_up:  # run alone (-k), or the prod case failed: up from scratch
        demo.run("scripts/up", "prod")
        demo.left_up.add("prod")
    before = _restart(demo, block_moto_port=True)
    after = demo.endpoints()
    assert after["AWS_ENDPOINT_URL_S3"] != before["AWS_ENDPOINT_URL_S3"]

    second = demo.run("scripts/up", "prod")
    assert "replaced" not in second, second  # the bucket is recreated or updated, never replaced
    orphaned = demo.orphans("prod")
    assert orphaned == []
    report.record(
        "restart: moto back on another port (its old one taken), scripts/up `prod`",
        "S3 endpoint changed; no bucket replace, no pending delete wedged; converged",
        orphaned,
        [],
        runs=2,
    )
    assert demo.buckets() == ["trainstack-prod-checkpoints"]
    demo.pulumi("prod", "preview", "--expect-no-changes")
    assert "nothing left on the local RunPod" in demo.run("scripts/down", "prod")
    demo.left_up.discard("prod")


@pytest.mark.serial  # 8 hosts that train: one at a time with the serial lane's other clusters
@pytest.mark.parametrize("demo", ["on"], indirect=True)
def test_with_hosts_a_restart_loses_the_running_cluster_and_up_makes_a_new_one(
    demo: Demo, report: Report
) -> None:
    """The issue's own steps as root, where the demo's pods are emulated hosts: those went with the stopped
    server, so the restarted one reads the cluster as lost (no RunPod secret exists to lose: the nodes'
    secrets come over SSH, issue #67). The second `up` refreshes, creates it again and delivers its
    secrets; prod's protect does not stand in the way (a create, not a replace), and every node is a live
    host again.

    Its first boot is also prod's demo as a user runs it (issue #33; it was an 8-node boot of its own in
    tests/e2e/test_demo_trains.py until issue #47): the demo's own node settings, steps advancing in
    scripts/watch, a checkpoint in prod's bucket under trainstack/prod/. After the restart the hosts run
    only what this case asks of them (_IDLE_NODES), and scripts/down takes prod down at the end."""
    demo.run("scripts/up", "prod")
    trains(demo, demo.tmp, "prod", "trainstack-prod-checkpoints", "trainstack/prod/")
    api = demo.endpoints()["RUNPOD_API_URL"]
    first = httpx.get(f"{api}/_admin/live", timeout=10).json()["clusters"]
    demo.idle()  # the restarted local RunPod's hosts: to exist, be lost and be made again, not to train
    _restart(demo)
    audit = httpx.get(f"{api}/_admin/audit", timeout=10).json()["entries"]
    lost = [e["event"] for e in audit if e["event"].endswith(".lost")]
    assert lost.count("pod.lost") == 8 and lost.count("cluster.lost") == 1 and "secret.lost" not in lost, lost

    second = demo.run("scripts/up", "prod")
    assert "refreshing first" in second and "protected" not in second, second
    assert demo.orphans("prod") == []
    live = httpx.get(f"{api}/_admin/live", timeout=10).json()["clusters"]
    assert len(live) == 1 and live[0]["id"] != first[0]["id"]
    hosts = httpx.get(f"{api}/_admin/hosts", timeout=10).json()
    assert len(hosts["hosts"]) == 8 and hosts["failed"] == [], hosts
    report.record(
        "restart with emulated hosts: scripts/up `prod` (protected), stop, start, scripts/up",
        "cluster read as lost; the second up refreshed, made it again, delivered its secrets; 8 live hosts",
        [],
        [],
        runs=2,
    )
    demo.pulumi("prod", "preview", "--expect-no-changes")
    # The way back: scripts/down takes the stack down, its bucket with the demo's checkpoints included.
    assert "scripts/down: 'prod' is down" in demo.run("scripts/down", "prod")
