"""The NVML readings recorded on a real machine (tests/train/recordings/), and nodes built from them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from train.node.nvml import GpuReading, Recording

RECORDING = Path(__file__).parent / "recordings" / "nvml-2026-11-30-nvidia-h200-x2.json"


def recorded() -> Recording:
    return Recording.load(RECORDING)


def node_of(gpus: int, snapshot: str = "idle") -> list[GpuReading]:
    """`gpus` readings: the recorded GPUs repeated in turn, each with its own index and PCI address."""
    base = recorded().snapshots[snapshot]
    return [
        replace(
            base[i % len(base)], index=i, pci_bus_id=f"00000000:{0x18 + i:02X}:00.0", uuid=f"GPU-test-{i}"
        )
        for i in range(gpus)
    ]


def write_replay(path: Path, readings: list[GpuReading], snapshot: str = "idle") -> Path:
    """A recording file holding `readings` (for $TRAINSTACK_GATE_REPLAY)."""
    rec = recorded()
    data = Recording(
        rec.recorded_at, f"{rec.machine}, rearranged by a test", rec.driver, {snapshot: readings}
    )
    path.write_text(json.dumps(data.to_json()))
    return path
