"""The GPU health gate on readings recorded on an H200 machine: healthy as recorded; each fault, made by
changing one field, refused with one line naming the GPU, the reason and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.train.recorded import node_of, recorded, write_replay
from train.node import healthgate, healthrecord
from train.node.nvml import THROTTLE_REASONS, ReplaySampler, with_fault


def test_the_recording_says_when_and_where() -> None:
    rec = recorded()
    assert rec.recorded_at.startswith("2026-11-30") and "nvidia-h200-x2" in rec.machine
    assert {g.name for g in rec.snapshots["idle"]} == {"NVIDIA H200"}
    assert set(rec.snapshots) == {"idle", "load"}


@pytest.mark.parametrize("snapshot", ["idle", "load"])
def test_recorded_machine_is_healthy(snapshot: str) -> None:
    readings = recorded().snapshots[snapshot]
    assert healthgate.check_node(readings, len(readings), under_load=snapshot == "load") == []


FAULTS = [
    ({"ecc_uncorrected_volatile": 2}, "ecc", "2 volatile uncorrected ECC error(s)"),
    ({"remap_pending": True}, "row_remap", "row remap is pending"),
    ({"remap_failed": True}, "row_remap", "remap failed"),
    ({"xid_events": (79,)}, "xid", "XID error(s) 79"),
    ({"pcie_width": 8}, "pcie", "PCIe link trained at x8, the GPU supports x16"),
    ({"nvlink_up": (True,) * 17 + (False,)}, "nvlink", "NVLink link(s) [17] down (17 of 18 up)"),
    ({"throttle_mask": THROTTLE_REASONS["hw_thermal_slowdown"]}, "throttle", "hw_thermal_slowdown"),
    ({"throttle_mask": THROTTLE_REASONS["hw_power_brake_slowdown"]}, "throttle", "hw_power_brake_slowdown"),
    ({"temperature_c": 85}, "temperature", "85 °C idle, limit 79 °C (slowdown at 89 °C)"),
]


@pytest.mark.parametrize(
    ("change", "check", "reason"), FAULTS, ids=[f[1] + "-" + next(iter(f[0])) for f in FAULTS]
)
def test_one_changed_field_fails_that_gpu_with_one_line(
    change: dict[str, object], check: str, reason: str
) -> None:
    healthy = node_of(8)
    sick = with_fault(healthy, 5, **change)
    section, lines = healthgate.run_gate(ReplaySampler([sick]), 8, "cluster")
    assert section["status"] == "fail"
    assert section["findings"] == [{"gpu": 5, "check": check, "reason": section["findings"][0]["reason"]}]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("GPU 5 (00000000:1D:00.0): ") and reason in lines[0]
    assert lines[0].endswith("replace the cluster (a node of an Instant Cluster cannot be swapped alone)")


def test_pcie_generation_is_judged_under_load_only() -> None:
    slow = with_fault(node_of(2, "load"), 1, pcie_gen=3)
    # an idle link drops its generation on purpose
    assert healthgate.check_node(slow, 2, under_load=False) == []
    (finding,) = healthgate.check_node(slow, 2, under_load=True)
    assert (finding.gpu, finding.reason) == (1, "PCIe link at gen 3 under load, the GPU supports gen 5")


def test_a_gpu_with_every_nvlink_down_is_caught_against_its_peers() -> None:
    dark = with_fault(node_of(4), 2, nvlink_up=(False,) * 18)
    (finding,) = healthgate.check_node(dark, 4)
    assert (finding.gpu, finding.check, finding.reason) == (
        2,
        "nvlink",
        "no NVLink link up, its peers have 18",
    )


def test_gpu_count_and_unsupported_fields() -> None:
    (finding,) = healthgate.check_node(node_of(7), 8)
    assert finding.line(node_of(7), "pod").startswith(
        "node: NVML sees 7 GPU(s), the stack expects 8; replace this pod"
    )
    blank = with_fault(node_of(2), 0, ecc_uncorrected_volatile=None, remap_pending=None, temperature_c=None)
    assert healthgate.check_node(blank, 2) == []  # what NVML does not report is not made up, nor failed


def test_count_honours_cuda_visible_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two nodes sharing one 2 x H200 host, each pinned to its GPU (the 2-node GPU run): NVML lists both,
    the job sees one. Indices and UUIDs both name a GPU; an empty list leaves none."""
    two = node_of(2)
    assert healthgate.visible(two, None) == list(two)
    assert [r.index for r in healthgate.visible(two, "1")] == [1]
    assert [r.index for r in healthgate.visible(two, f"{two[0].uuid}")] == [0]
    assert healthgate.visible(two, "") == []
    # The under-load gate of the straggler test (train/node/preflight.py) calls run_gate the same way.
    assert healthgate.run_gate(ReplaySampler([two]), 1, "pod", env={"CUDA_VISIBLE_DEVICES": "0"})[1] == []
    assert healthgate.run_gate(ReplaySampler([two]), 1, "pod", env={})[1] != []
    monkeypatch.setenv(healthgate.REPLAY_ENV, str(write_replay(tmp_path / "replay.json", two)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert healthgate.main(["--record", str(tmp_path / "h.json"), "--expected-gpus", "1"]) == 0
    assert healthgate.main(["--record", str(tmp_path / "h.json"), "--expected-gpus", "2"]) == 1
    assert "NVML sees 1 GPU(s), the stack expects 2" in capsys.readouterr().err


def test_main_writes_the_record_and_ends_with_the_first_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sick = with_fault(with_fault(node_of(8), 3, remap_pending=True), 6, xid_events=(48,))
    monkeypatch.setenv(healthgate.REPLAY_ENV, str(write_replay(tmp_path / "replay.json", sick)))
    record = tmp_path / "logs" / "health.json"
    assert healthgate.main(["--record", str(record), "--expected-gpus", "8"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("GPU 3 (00000000:1B:00.0): a memory row remap is pending")
    saved = json.loads(record.read_text())
    assert saved["status"] == "fail" and saved["gate"]["reason"] == last
    assert saved["gate"]["elapsed_s"] >= 0  # its time, summed into the goodput ledger's health time
    assert [f["gpu"] for f in saved["gate"]["findings"]] == [3, 6]
    assert len(saved["gate"]["gpus"]) == 8


def test_main_passes_a_healthy_node_and_skips_a_cpu_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(healthgate.REPLAY_ENV, str(write_replay(tmp_path / "replay.json", node_of(8))))
    record = tmp_path / "health.json"
    assert healthgate.main(["--record", str(record), "--expected-gpus", "8"]) == 0
    assert json.loads(record.read_text())["status"] == "pass"
    assert (
        healthgate.main(["--record", str(tmp_path / "cpu.json"), "--expected-gpus", "1", "--device", "cpu"])
        == 0
    )
    assert "no GPU: cpu test cluster" in capsys.readouterr().err
    assert json.loads((tmp_path / "cpu.json").read_text())["status"] == "skipped"


def test_the_health_time_is_the_sum_of_the_checks_elapsed_seconds(tmp_path: Path) -> None:
    record = tmp_path / "health.json"
    assert healthrecord.seconds(healthrecord.load(record)) is None  # no record yet: nothing said
    healthrecord.update(record, "gate", {"status": "pass", "elapsed_s": 4.0})
    healthrecord.update(record, "straggler", {"status": "pass"})  # a record of the last version: no time
    healthrecord.update(record, "burn_in", {"status": "pass", "elapsed_s": 900.5})
    assert healthrecord.seconds(healthrecord.load(record)) == 904.5
    healthrecord.update(record, "allreduce", {"status": "pass", "elapsed_s": "soon"})  # not a number

    assert healthrecord.seconds(healthrecord.load(record)) == 904.5
