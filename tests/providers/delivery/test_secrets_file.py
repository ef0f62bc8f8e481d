"""delivery:SecretsFile without a network: the real write script run by a local shell in place of ssh, the
values only on stdin, mode 0600, diff by salted hash, a refresh that finds the file gone, delete that never
fails, check failures that name no value (issue #67)."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from providers.delivery.secrets_file import SecretsFileProvider, render, secrets_path

VALUES = {
    "HF_TOKEN": "hf_PLANTED'quote\"$(touch pwned) `touch pwned` value",
    "AWS_SECRET_ACCESS_KEY": "PLANTED/9d1c",
}


class LocalShell:
    """Runs the command ssh would run on the node here, with bash; 255 (unreachable) while `down`."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bytes | None]] = []
        self.down = False

    def __call__(
        self, argv: Sequence[str], stdin: bytes | None, timeout: float
    ) -> subprocess.CompletedProcess[bytes]:
        self.calls.append((list(argv), stdin))
        if self.down:
            return subprocess.CompletedProcess(list(argv), 255, b"", b"no route")
        done = subprocess.run(["bash", "-c", argv[-1]], input=stdin, capture_output=True, timeout=timeout)
        return subprocess.CompletedProcess(list(argv), done.returncode, done.stdout, done.stderr)


def props(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    base = {
        "host": "10.64.1.2",
        "pod_id": "pod0",
        "path": str(tmp_path / "run" / "secrets" / "pod0.env"),
        "values": dict(VALUES),
        "known_hosts": str(tmp_path / "known_hosts"),
        "deadline_s": 0.0,
    }
    return base | changes


def test_the_file_is_0600_sources_to_the_values_and_no_value_is_on_a_command_line(tmp_path: Path) -> None:
    shell = LocalShell()
    provider = SecretsFileProvider(runner=shell)
    outs = provider.create(props(tmp_path)).outs or {}
    path = Path(props(tmp_path)["path"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    printed = subprocess.run(
        ["bash", "-c", f'source {path} && printf "%s\\n%s" "$HF_TOKEN" "$AWS_SECRET_ACCESS_KEY"'],
        capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]}, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert printed == f"{VALUES['HF_TOKEN']}\n{VALUES['AWS_SECRET_ACCESS_KEY']}"
    assert not (tmp_path / "pwned").exists()  # a value is data, never run
    for argv, _stdin in shell.calls:
        assert not any(v in " ".join(argv) for v in VALUES.values())
    assert [stdin for _a, stdin in shell.calls] == [render(VALUES).encode()]
    assert "values" not in outs and not any(v in repr(outs) for v in VALUES.values())
    assert outs["values_hash"].startswith("hmac-sha256$") and len(outs["version"]) == 16


def test_diff_sees_a_new_value_a_new_pod_or_boot_and_nothing_else(tmp_path: Path) -> None:
    provider = SecretsFileProvider(runner=LocalShell())
    news = props(tmp_path)
    olds = provider.create(news).outs or {}
    assert not provider.diff("x", olds, news).changes
    for changed in (
        {"values": {**VALUES, "HF_TOKEN": "rotated"}},
        {"pod_id": "pod1"},
        {"boot": 1},
        {"host": "10.64.1.3"},
    ):
        diff = provider.diff("x", olds, {**news, **changed})
        assert diff.changes and diff.replaces == [], changed
    again = provider.update("x", olds, news).outs or {}
    assert again["version"] == olds["version"]  # same values: the node's start script is not restarted
    rotated = provider.update("x", olds, {**news, "values": {"HF_TOKEN": "rotated"}}).outs or {}
    assert rotated["version"] != olds["version"]


def test_refresh_that_finds_the_file_gone_makes_the_next_up_write_it(tmp_path: Path) -> None:
    shell = LocalShell()
    provider = SecretsFileProvider(runner=shell)
    news = props(tmp_path)
    olds = provider.create(news).outs or {}
    assert provider.read("x", olds).outs == olds
    Path(news["path"]).unlink()  # a container restarted behind Pulumi's back
    refreshed = provider.read("x", olds).outs or {}
    assert provider.diff("x", refreshed, news).changes
    shell.down = True  # a node that does not answer: the state stays as it is
    assert provider.read("x", olds).outs == olds


def test_delete_removes_the_file_and_never_fails_on_a_gone_node(tmp_path: Path) -> None:
    shell = LocalShell()
    provider = SecretsFileProvider(runner=shell)
    olds = provider.create(props(tmp_path)).outs or {}
    provider.delete("x", olds)
    assert not Path(props(tmp_path)["path"]).exists()
    shell.down = True
    provider.delete("x", olds)  # one short attempt, then it goes with its container


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"path": "/workspace/trainstack/secrets.env"}, "path"),
        ({"values": {"BAD NAME": "PLANTEDv"}}, "values"),
    ],
)
def test_check_refuses_a_path_in_the_workspace_and_bad_names_without_a_value(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    result = SecretsFileProvider().check({}, props(tmp_path, **change))
    assert [f.property for f in result.failures] == [field]
    assert "PLANTED" not in " ".join(f.reason for f in result.failures)


def test_each_pod_has_its_own_file_outside_the_workspace() -> None:
    assert secrets_path("abc123") == "/run/trainstack/secrets/abc123.env"
