"""The local demo's workspace (ops/local_demo.py): with emulated hosts its nodes' disk is this machine's, so
the NVMe latency alert's floor is relaxed like the demo's other hardware floors, and `scripts/up` says so
(issue #68: every `scripts/watch` screen of the demo showed `nvme_latency_high`, 5,919-13,594 us against
100 us)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.stack import Stack
from ops import local_demo


def test_with_hosts_the_demo_relaxes_the_nvme_floor_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    set_keys: dict[str, Any] = {}
    monkeypatch.setattr(
        Stack, "set_config", lambda self, key, value=None, **how: set_keys.__setitem__(key, (value, how))
    )
    monkeypatch.setattr(local_demo, "give_account_spend_limit", lambda: 80.0)
    monkeypatch.setattr(local_demo, "point_nodes_at_moto", lambda ws, stack: "https://10.64.0.1:4566")
    assert local_demo.main(["dev", str(tmp_path)]) == 0
    value, how = set_keys["trainstack:alerts.nvme_p99_max_us"]
    assert float(value) >= 10_000 and how["path"]  # above a laptop disk's p99, in the local workspace only
    assert "nvme_latency_high floor is 100 ms" in capsys.readouterr().err


def test_control_plane_only_sets_no_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    set_keys: list[str] = []
    monkeypatch.setattr(Stack, "set_config", lambda self, key, value=None, **how: set_keys.append(key))
    monkeypatch.setattr(local_demo, "give_account_spend_limit", lambda: 80.0)
    monkeypatch.setattr(local_demo, "point_nodes_at_moto", lambda ws, stack: None)
    assert local_demo.main(["dev", str(tmp_path)]) == 0
    assert "trainstack:alerts.nvme_p99_max_us" not in set_keys
