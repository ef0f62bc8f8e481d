"""harness/cpu_roles.py names each process of a measured command by its role; a test's temporary paths,
which sit on many command lines, must not turn every process into pytest."""

from __future__ import annotations

import pytest

from harness.cpu_roles import report, role_of

TMP = "/tmp/pytest-of-root/pytest-7/test_x0"


@pytest.mark.parametrize(
    ("cmdline", "role"),
    [
        (
            f"/v/bin/python /v/bin/torchrun --nnodes=2 -m train.node.preflight --record {TMP}/h",
            "node: torchrun agent",
        ),
        ("/v/bin/python -u train/train.py --steps 200", "node: training"),
        (
            f"/v/bin/python -m compileall -q -j 0 {TMP}/cold-cache/torch-venv/lib",
            "uv / pip / compileall (installs)",
        ),
        ("/work/h47/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest"),
        (f"/cache/pulumi-cli-3/pulumi up --yes --stack local-cpu --cwd {TMP}/ws", "pulumi: CLI"),
        ("pulumi preview --stack dev --policy-pack /r/policy --policy-pack-config /r/p.json", "pulumi: CLI"),
        ("/r/.venv/bin/python -u /r/policy/__main__.py 127.0.0.1:4001", "pulumi: policy pack"),
        ("/v/bin/python -m emulator --port 0 --hosts on", "local RunPod (emulator)"),
        ("/usr/sbin/sshd -D -f /x/sshd_config", "sshd / ssh / scp"),
        ("/usr/bin/make -j2", "other: make"),
    ],
)
def test_each_process_is_named_by_its_command_line(cmdline: str, role: str) -> None:
    assert role_of(cmdline) == role


def test_the_report_shows_what_sampling_did_not_see() -> None:
    lines = report(10.0, 5.0, {"node: training": (6.0, 2), "pytest": (1.5, 1)})
    assert lines[0] == "total 10.0 CPU-s in 5 s wall"
    assert lines[3:5] == ["| node: training | 6.0 | 2 |", "| pytest | 1.5 | 1 |"]  # costliest first
    assert lines[-1].startswith("| (unseen") and "| 2.5 |" in lines[-1]
