"""Fixtures for real local clusters: a bridge of our own, moto on its host address, a local RunPod with hosts.

Everything here is created by the fixtures and removed by their finalizers, on failure too: the bridge
(`tsh<pid>`, 10.250.N.1/24 on a local RunPod address slot N claimed for it, emulator/netslot.py), every
namespace the emulator made on it, moto, the emulator and the SSH key. The slot keeps the bridges of test
processes running side by side (pytest-xdist workers, another checkout's suite, the demo) apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.cachedir import cache_dir
from emulator import hostnet, netslot
from emulator.hostnet import Bridge
from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod, start_moto_s3
from harness.webhook import Receiver

# Every bridge address a hosts test may use (each claims one /24 of it): what their `allow_hosts` lets in.
HOSTS_NET = "10.250.0.0/16"
TORCH_VENV = cache_dir() / "torch-venv"  # scripts/bootstrap-torch installs it


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: nodes are network namespaces (run as root, as CI does)"
    why = hostnet.unavailable_reason()
    if why is not None:
        return why
    for tool in ("ssh", "scp", "ssh-keygen", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install openssh-client)"
    if not (TORCH_VENV / "bin" / "torchrun").exists():
        return f"no torch venv at {TORCH_VENV}; run scripts/bootstrap-torch"
    return None


@dataclass
class HostsEnv:
    """What a cluster test needs: the emulator (hosts on), moto's HTTPS URL and certificate, the key."""

    runpod: LocalRunPod
    s3_endpoint: str
    private_key: Path
    bridge: Bridge
    ca_bundle: Path  # moto's self-signed certificate


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """The team's channel: every message the supervisor and the aggregator post, in order."""
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def bridge() -> Iterator[Bridge]:
    why = _missing()
    if why is not None:
        pytest.skip(why)
    slot = netslot.claim()  # this process's own addresses, held until the module's tests are done
    bridge = Bridge(f"tsh{os.getpid() % 100000}", slot.slot.bridge_cidr)
    try:
        bridge.remove()  # a leftover of a killed run with the same pid
        bridge.create()
        yield bridge
    finally:
        for name in hostnet.list_namespaces(f"ts-{bridge.name}-"):
            hostnet.delete_namespace(name)
        bridge.remove()
        slot.release()


@pytest.fixture(scope="module")
def node_env_overrides() -> dict[str, str]:
    """What a module changes in every node's environment (a module overrides this fixture, e.g. to train
    longer than the default ~20 s)."""
    return {}


@pytest.fixture(scope="module")
def hosts_env(
    bridge: Bridge, tmp_path_factory: pytest.TempPathFactory, node_env_overrides: dict[str, str]
) -> Iterator[HostsEnv]:
    root = tmp_path_factory.mktemp("hosts")
    key = root / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    # HTTPS, as the checkpoint bucket's TLS-only policy demands of every client.
    cert, cert_key = root / "s3.crt", root / "s3.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-days", "1", "-subj", "/CN=trainstack-test-s3"),
            *("-addext", f"subjectAltName=IP:{bridge.host_ip}", "-keyout", str(cert_key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    moto = start_moto_s3(root / "moto.log", host=bridge.host_ip, tls=(cert, cert_key))
    node_env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CA_BUNDLE": str(cert),
        "TRAINSTACK_PYTHON": str(TORCH_VENV / "bin" / "python"),  # host dotfiles may reorder PATH
        "TRAINSTACK_CPU_PROCS_PER_NODE": "1",
        # One intra-op thread for the tiny MLP: with torch's default (a thread a core) the idle thread spins
        # through each step's sleep (100 steps at 0.1 s: 1.86 s of CPU against 0.14 s,
        # docs/journal/2026-12-01-perf-test-lanes.md).
        "OMP_NUM_THREADS": "1",
        # The bucket sync timer: each sync is a Python process importing boto3 (~0.5 s of CPU). Checkpoints
        # still land while the ~20 s of training runs; every start script also syncs at its end.
        "TRAINSTACK_CHECKPOINT_INTERVAL_S": "5",
        "TRAINSTACK_STEPS": "200",
        "TRAINSTACK_CHECKPOINT_EVERY": "10",
        "TRAINSTACK_LOG_EVERY": "20",
        "TRAINSTACK_STEP_SLEEP_S": "0.1",  # ~20 s of training: scrape an agent, then lose a node mid-run
        "TRAINSTACK_METRICS_INTERVAL_S": "1",  # the agents sample each second: a scrape sees progress early
    } | node_env_overrides
    args = [
        *FAST_ARGS,
        "--hosts",
        "on",
        "--hosts-bridge",
        bridge.name,
        "--hosts-path",
        str(TORCH_VENV / "bin"),
    ]
    for name, value in node_env.items():
        args += ["--hosts-env", f"{name}={value}"]
    runpod = start_local_runpod(root / "runpod", *args)
    try:
        with runpod.client() as api:
            api.put("/v2/account/ssh-keys", json={"keys": [key.with_suffix(".pub").read_text().strip()]})
        yield HostsEnv(runpod, moto.endpoint_url, key, bridge, cert)
    finally:
        runpod.stop()
        moto.stop()
