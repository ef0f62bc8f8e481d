"""`scripts/logs` and `scripts/ssh` (stackview/reach.py): the node picked by rank or pod, the ssh command line
with the stack's key and known_hosts, the log's path on the node, and the one command line's wiring (issue
#68: `trainstack logs dev` and `trainstack ssh dev` were invalid choices). The real thing, against a node of
the local RunPod, is in tests/hosts/test_local_cluster.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from providers import settings
from scripts import cli
from stackview import reach, sources

OUTPUTS: dict[str, Any] = {
    "workdir": "/workspace/trainstack",
    "nodes": [
        {"rank": 0, "ip": "10.65.0.2", "pod_id": "podzero", "ssh_endpoint": "10.0.0.5:22"},
        {"rank": 1, "ip": "10.65.0.3", "pod_id": "podone", "ssh_endpoint": "10.0.0.6:2222"},
    ],
}


@pytest.fixture
def keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("not a real key\n")
    monkeypatch.setenv("TRAINSTACK_SSH_KEY", str(key))
    monkeypatch.setenv("TRAINSTACK_KNOWN_HOSTS_DIR", str(tmp_path / "kh"))
    settings.reset()
    yield key
    settings.reset()


def _fake_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "stack_outputs", lambda cwd, stack: OUTPUTS)


def test_logs_and_ssh_are_commands_of_the_one_command_line() -> None:
    names = {c.name for c in cli.COMMANDS}
    assert {"logs", "ssh"} <= names
    assert (Path(cli.__file__).parent / "logs").is_file() and (Path(cli.__file__).parent / "ssh").is_file()


def test_ssh_to_a_rank_uses_the_stacks_key_and_known_hosts(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_outputs(monkeypatch)
    ran: list[Sequence[str]] = []
    code = reach.ssh(
        ["dev", "--cwd", str(tmp_path), "--rank", "1", "--", "nvidia-smi", "-L"], run=_record(ran)
    )
    assert code == 0
    argv = list(ran[0])
    assert argv[0] == "ssh" and argv[-3:] == ["root@10.0.0.6", "--", "nvidia-smi -L"]
    assert argv[argv.index("-p") + 1] == "2222"
    assert f"-oUserKnownHostsFile={tmp_path / 'kh' / 'dev'}" in argv
    assert "-oHostKeyAlias=podone" in argv  # host keys kept under the pod id, as delivery pins them
    assert argv[argv.index("-i") + 1] == str(keyed)
    assert "-t" not in argv  # a command, not a terminal


def test_ssh_by_pod_id_and_a_shell(keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_outputs(monkeypatch)
    ran: list[Sequence[str]] = []
    assert reach.ssh(["dev", "--cwd", str(tmp_path), "--pod", "podzero"], run=_record(ran)) == 0
    assert ran[0][-1] == "root@10.0.0.5"  # no command: a shell


def test_an_unknown_rank_is_bad_use_naming_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_outputs(monkeypatch)
    assert reach.ssh(["dev", "--cwd", str(tmp_path), "--rank", "5"], run=_record([])) == reach.EXIT_USAGE
    err = capsys.readouterr().err
    assert "no node with rank 5" in err and "1 (podone)" in err


def test_a_stack_that_is_not_up_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No Pulumi.yaml in the workspace: the stack was never brought up here.
    assert reach.logs(["dev", "--cwd", str(tmp_path)], run=_record([])) == reach.EXIT_NOT_UP
    assert "scripts/up dev" in capsys.readouterr().err


def test_logs_follow_tails_the_start_scripts_log_of_the_rank(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_outputs(monkeypatch)
    ran: list[Sequence[str]] = []
    assert reach.logs(["dev", "--cwd", str(tmp_path), "--rank", "1", "-f", "-n", "20"], run=_record(ran)) == 0
    assert ran[0][-1] == "exec tail -n 20 -F /workspace/trainstack/logs/start-node-1.podone.log"
    ran.clear()
    assert reach.logs(["dev", "--cwd", str(tmp_path), "--progress", "-f"], run=_record(ran)) == 0
    assert ran[0][-1].endswith("/workspace/trainstack/metrics/progress-node-*.podzero.jsonl")


def test_logs_tail_runs_on_the_node_and_prints_it(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_outputs(monkeypatch)
    asked: list[str] = []

    def fake_run(self: reach.Ssh, command: str, stdin: bytes | None = None) -> str:
        asked.append(f"{self.target.host}:{self.target.port} {command}")
        return "step 40 loss 0.5\n"

    monkeypatch.setattr(reach.Ssh, "run", fake_run)
    assert reach.logs(["dev", "--cwd", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "step 40 loss 0.5\n"
    assert asked[0].startswith("10.0.0.5:22 set -- /workspace/trainstack/logs/start-node-0.podzero.log;")


def test_a_node_ssh_cannot_reach_gets_runpods_container_log(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_outputs(monkeypatch)

    def unreachable(self: reach.Ssh, command: str, stdin: bytes | None = None) -> str:
        raise reach.DeliveryError("ssh to root@10.0.0.5:22 failed 3 times")

    monkeypatch.setattr(reach.Ssh, "run", unreachable)
    monkeypatch.setattr(sources, "pod_logs", lambda ids, lines: {ids[0]: ["container says hi"]})
    assert reach.logs(["dev", "--cwd", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert out.out == "container says hi\n"
    assert "failed 3 times" in out.err and "RunPod's container log of pod podzero" in out.err


def _record(ran: list[Sequence[str]]) -> reach.Exec:
    def run(argv: Sequence[str]) -> int:
        ran.append(argv)
        return 0

    return run
