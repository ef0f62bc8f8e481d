"""delivery:NodeFiles without a network: the ssh/scp argv, retries to a deadline, diff and delete."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from providers.delivery.node_files import NodeFilesProvider, NodeFilesSpec, deliver, digest
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget, UnreachableError


def args(tmp_path: Path, **changes: object) -> NodeFilesSpec:
    base: dict[str, object] = {
        "host": "10.64.1.2",
        "pod_id": "pod0",
        "rank": 0,
        "remote_dir": "/workspace/trainstack",
        "files": {"hostfile": "10.64.1.2 slots=8\n", "start-node-0.sh": "#!/usr/bin/env bash\n"},
        "start_script": "start-node-0.sh",
        "known_hosts": str(tmp_path / "known_hosts"),
    }
    return NodeFilesSpec.model_validate(base | changes)


class Recorder:
    """Answers each call with the next exit status (255: ssh could not connect)."""

    def __init__(self, statuses: Sequence[int]) -> None:
        self.statuses = list(statuses)
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], stdin: bytes | None, timeout: float
    ) -> subprocess.CompletedProcess[bytes]:
        self.calls.append(list(argv))
        status = self.statuses.pop(0) if self.statuses else 0
        return subprocess.CompletedProcess(
            list(argv), status, b"started start-node-0.sh as pid 7\n", b"no route"
        )


def test_delivery_copies_then_starts_with_batch_mode_and_own_known_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAINSTACK_SSH_KEY", raising=False)
    a = args(tmp_path)
    runner = Recorder([])
    ssh = Ssh(
        SshTarget(a.host, a.port, a.user, a.pod_id, Path(a.known_hosts)), runner=runner, sleep=lambda _: None
    )
    assert deliver(a, ssh) == "started start-node-0.sh as pid 7"
    tools = [c[0] for c in runner.calls]
    assert tools == ["ssh", "scp", "ssh"]
    for call in runner.calls:
        assert "-oBatchMode=yes" in call and f"-oUserKnownHostsFile={a.known_hosts}" in call
        assert "-oHostKeyAlias=pod0" in call
    assert runner.calls[-1][-1].startswith("bash -s -- /workspace/trainstack ")


def test_unreachable_node_is_retried_until_the_deadline(tmp_path: Path) -> None:
    a = args(tmp_path)
    clock = iter(float(t) for t in range(0, 1000, 10))
    runner = Recorder([255] * 100)
    ssh = Ssh(
        SshTarget(a.host, a.port, a.user, a.pod_id, Path(a.known_hosts)),
        deadline_s=30,
        runner=runner,
        sleep=lambda _: None,
        clock=lambda: next(clock),
    )
    with pytest.raises(UnreachableError, match="failed 3 times"):
        ssh.run("true")


def test_any_change_redelivers_and_delete_does_nothing(tmp_path: Path) -> None:
    provider = NodeFilesProvider()
    old = args(tmp_path).model_dump()
    assert not provider.diff("id", old, dict(old)).changes
    new_hostfile = old | {"files": old["files"] | {"hostfile": "10.64.2.2 slots=8\n"}}
    result = provider.diff("id", old, new_hostfile)
    assert result.changes and not result.replaces
    assert digest(args(tmp_path)) != digest(NodeFilesSpec.model_validate(new_hostfile))
    provider.delete("id", old)  # nothing to undo: succeeds without touching the node


def test_delete_forgets_the_nodes_host_key_and_keeps_the_others(tmp_path: Path) -> None:
    """A stopped pod comes back with new host keys under the same pod id: the delivery that lets go of it
    forgets the pinned key (hashed, as Debian's HashKnownHosts writes it), and no other node's."""
    known = tmp_path / "known_hosts"
    keys = {}
    for alias in ("pod0", "pod1"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / alias)], check=True
        )
        keys[alias] = (tmp_path / f"{alias}.pub").read_text().split()[:2]
    known.write_text("".join(f"{alias} {' '.join(k)}\n" for alias, k in keys.items()))
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)  # hash them
    assert "pod0" not in known.read_text()

    def pinned(alias: str) -> bool:
        found = subprocess.run(["ssh-keygen", "-F", alias, "-f", str(known)], capture_output=True)
        return found.returncode == 0 and bool(found.stdout.strip())

    assert pinned("pod0") and pinned("pod1")
    NodeFilesProvider().delete("pod0-rank0", args(tmp_path).model_dump())
    assert not pinned("pod0") and pinned("pod1")
    assert not (tmp_path / "known_hosts.old").exists()
    NodeFilesProvider().delete("pod0-rank0", args(tmp_path).model_dump())  # again: nothing left, no error


def test_paths_must_stay_inside_the_workdir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="relative paths"):
        args(tmp_path, files={"../etc/passwd": "x", "start-node-0.sh": ""})


def test_create_delivers_through_the_injected_runner_and_records_the_digest(tmp_path: Path) -> None:
    runner = Recorder([])
    provider = NodeFilesProvider(runner)
    props = args(tmp_path).model_dump()
    result = provider.create(props)
    assert result.id == "pod0-rank0"
    assert [c[0] for c in runner.calls] == ["ssh", "scp", "ssh"]
    assert result.outs is not None and result.outs["digest"] == digest(args(tmp_path))
    assert result.outs["delivered_at"] > 0


def test_update_delivers_again_and_a_failed_step_fails_the_update(tmp_path: Path) -> None:
    old = args(tmp_path).model_dump()
    new = old | {"files": old["files"] | {"hostfile": "10.64.2.2 slots=8\n"}}
    runner = Recorder([])
    result = NodeFilesProvider(runner).update("pod0-rank0", old, new)
    assert result.outs is not None and result.outs["digest"] == digest(NodeFilesSpec.model_validate(new))
    assert len(runner.calls) == 3
    failing = Recorder([0, 0, 1])  # the start script exits 1 on the node
    with pytest.raises(DeliveryError, match="exited 1"):
        NodeFilesProvider(failing).update("pod0-rank0", old, new)


def test_the_provider_pickles_without_a_runner() -> None:
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(NodeFilesProvider())), NodeFilesProvider)  # noqa: S301
