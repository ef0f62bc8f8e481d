"""Without hosts the local RunPod says so, and a pod's SSH endpoint stays the mapped public port."""

from __future__ import annotations

import pytest

from harness.local import LocalRunPod

pytestmark = pytest.mark.services


def test_health_says_control_plane_only(local_runpod: LocalRunPod) -> None:
    hosts = local_runpod.admin.client.get("/_admin/health").json()["hosts"]
    assert hosts == {
        "enabled": False,
        "mode": "control-plane only",
        "reason": "hosts are off (--hosts off)",
        "bridge": None,
        "hostIp": None,
    }
    assert local_runpod.admin.hosts()["hosts"] == []
