"""The local RunPod's `type: SLURM` clusters run a real Slurm (emulator/slurm.py): slurmctld on the controller
(rank 0), slurmd on every member, one munge key; `sinfo` over SSH on the controller shows every node idle, and
a job runs on all of them through Slurm itself. A `type: TRAINING` cluster runs no Slurm."""

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
from emulator.slurm import accounting_unavailable, slurm_unavailable
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod
from tests.emulator.conftest import cluster_body
from tests.polling import poll

pytestmark = [pytest.mark.serial, pytest.mark.root]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: hosts are network namespaces"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install openssh-client)"
    return hostnet.unavailable_reason() or slurm_unavailable()


@pytest.fixture
def key(tmp_path: Path) -> Path:
    if why := _missing():
        pytest.skip(why)
    path = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture
def server(tmp_path: Path, key: Path) -> Iterator[LocalRunPod]:
    runpod = start_local_runpod(tmp_path / "runpod", *FAST_ARGS, "--hosts", "on")
    try:
        with runpod.client() as api:
            api.put("/v2/account/ssh-keys", json={"keys": [key.with_suffix(".pub").read_text().strip()]})
        yield runpod
    finally:
        runpod.stop()


def _members(api: httpx.Client, cluster_id: str) -> list[dict[str, Any]] | None:
    listed = api.get(f"/v2/clusters/{cluster_id}/pods").json()
    listed = listed.get("pods", []) if isinstance(listed, dict) else listed
    pods = sorted((api.get(f"/v2/pods/{p['id']}").json() for p in listed), key=lambda p: p["cluster"]["rank"])
    return pods if pods and all(p.get("ssh", {}).get("direct") for p in pods) else None


def _ssh(key: Path, pod: dict[str, Any], command: str) -> subprocess.CompletedProcess[str]:
    direct = pod["ssh"]["direct"]
    argv = ["ssh", "-i", str(key), "-oBatchMode=yes", "-oStrictHostKeyChecking=no"]
    argv += ["-oUserKnownHostsFile=/dev/null", "-oLogLevel=ERROR", "-p", str(direct["port"])]
    return subprocess.run(
        [*argv, f"root@{direct['host']}", command], capture_output=True, text=True, timeout=60, check=False
    )


def _idle(key: Path, controller: dict[str, Any], names: set[str]) -> dict[str, str] | None:
    out = _ssh(key, controller, "sinfo -h -N -o '%N %t'").stdout.split()
    states = dict(zip(out[::2], out[1::2], strict=True)) if len(out) % 2 == 0 else {}
    return states if set(states) == names and set(states.values()) == {"idle"} else None


SACCT = "sacct -X -n -P -o JobName,State"


def _daemon_logs(root: Path) -> str:
    return "\n".join(f"== {p}\n{p.read_text(errors='replace')[-3000:]}" for p in root.rglob("slurm*.log"))


def test_a_slurm_cluster_runs_slurm_on_every_member_and_runs_a_job(
    key: Path, server: LocalRunPod, tmp_path: Path
) -> None:
    with server.client() as api:
        made = api.post("/v2/clusters", json=cluster_body("slurmy", type="SLURM", startSsh=True))
        assert made.status_code == 201, made.text
        pods = poll(lambda: _members(api, made.json()["id"]), "both members reachable over SSH", 30, 0.2)
    controller = pods[0]
    names = {p["id"] for p in pods}
    states = poll(
        lambda: _idle(key, controller, names),
        "sinfo on the controller showing both nodes idle",
        60,
        0.5,
        log=lambda: _ssh(key, controller, "sinfo -N; scontrol show nodes | grep -i reason").stdout,
    )
    assert states == dict.fromkeys(names, "idle")
    # The controller's configuration names each member by its pod id and fabric address, in rank order.
    conf = _ssh(key, controller, "cat /etc/slurm/slurm.conf").stdout
    for pod in pods:
        assert f"NodeName={pod['id']} " in conf
    # Slurm itself runs a step on both nodes: each task prints the host it ran on.
    job = _ssh(key, controller, "srun -N2 --ntasks-per-node=1 -l hostname")
    assert job.returncode == 0, job.stderr + _daemon_logs(tmp_path)
    ran = sorted(line.split(": ", 1)[1].split()[0] for line in job.stdout.splitlines())
    assert ran == sorted(names)
    if accounting_unavailable() is None:
        # slurmdbd on the controller (MariaDB on its loopback) has the job: sacct answers as on a cluster
        # that keeps accounting.
        accounted = poll(
            lambda: "hostname|COMPLETED" in (out := _ssh(key, controller, SACCT).stdout) and out,
            "sacct on the controller showing the step's job COMPLETED",
            60,
            0.5,
            log=lambda: (
                _ssh(key, controller, f"{SACCT}; cat /etc/slurm/slurmdbd.conf >/dev/null").stderr
                + _daemon_logs(tmp_path)
            ),
        )
        assert "hostname|COMPLETED" in accounted


def test_a_training_cluster_runs_no_slurm(key: Path, server: LocalRunPod) -> None:
    with server.client() as api:
        made = api.post("/v2/clusters", json=cluster_body("plain", startSsh=True))
        assert made.status_code == 201, made.text
        pods = poll(lambda: _members(api, made.json()["id"]), "both members reachable over SSH", 30, 0.2)
    probe = _ssh(key, pods[0], "pgrep -x slurmctld; pgrep -x slurmd; test -e /run/munge/munge.socket.2")
    assert probe.stdout.strip() == "" and probe.returncode != 0
