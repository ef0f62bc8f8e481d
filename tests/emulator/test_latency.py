"""The image-size latency model: cold and cached first boots, cluster members, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.config import Timing
from emulator.latency import BootLatency, image_gb, ready_s
from emulator.models import PodRecord
from harness.local import start_local_runpod

IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
TIMING = Timing()


def pod(ident: str, created: float, *, dc: str = "US-TX-3", cluster: str | None = None) -> PodRecord:
    return PodRecord(
        id=ident,
        name=ident,
        image=IMAGE,
        gpu_id="NVIDIA H100 80GB HBM3",
        gpu_count=8,
        data_center_id=dc,
        cost_per_gpu=3.99,
        created_at=created,
        boot_at=created,
        public_ip="198.51.100.1",
        port_base=20000,
        cluster_id=cluster,
    )


def test_ready_matches_the_published_cold_and_cached_figures() -> None:
    assert ready_s(16, cold=True) == pytest.approx(165)
    assert ready_s(16, cold=False) == pytest.approx(33)
    assert 30 <= ready_s(0.5, cold=True) < ready_s(8, cold=True) < ready_s(16, cold=True) <= 170
    assert 200 <= ready_s(16, cold=True, cluster=True) <= 300  # "a few minutes"


def test_image_sizes_known_and_default() -> None:
    assert image_gb(IMAGE, 4.0) == 16.0
    assert image_gb("ghcr.io/acme/trainer:1.2", 4.0) == 4.0
    assert image_gb("runpod/base@sha256:abc", 4.0) == 8.0


def test_first_pull_is_cold_later_pods_are_cached_per_data_center() -> None:
    model = BootLatency("image", TIMING, 16.0)
    extra = TIMING.starting_s + TIMING.runtime_lag_s
    assert model.provisioning_s(pod("a", 0)) + extra == pytest.approx(165)
    assert model.provisioning_s(pod("b", 10)) + extra == pytest.approx(165)  # pull of "a" not finished
    assert model.provisioning_s(pod("c", 200)) + extra == pytest.approx(33)
    assert model.provisioning_s(pod("d", 200, dc="EU-RO-1")) + extra == pytest.approx(165)
    assert model.provisioning_s(pod("e", 300, cluster="k")) + extra == pytest.approx(225)


def test_restarts_and_the_fixed_model_use_the_timing() -> None:
    model = BootLatency("image", TIMING, 16.0)
    restarted = pod("a", 0)
    restarted.boot_at = 50.0
    assert model.provisioning_s(restarted) == TIMING.provisioning_s
    assert BootLatency("fixed", TIMING, 16.0).provisioning_s(pod("b", 0)) == TIMING.provisioning_s


@pytest.mark.services
def test_server_flag_drives_pod_status(tmp_path: Path) -> None:
    server = start_local_runpod(tmp_path, "--time-scale", "0", "--latency-model", "image")
    try:
        with server.client() as api:
            body = {"name": "p", "image": IMAGE, "gpu": {"id": "NVIDIA H100 80GB HBM3", "count": 8}}
            pod_id = api.post("/v2/pods", json=body).json()["id"]
            server.admin.advance(100)
            assert api.get(f"/v2/pods/{pod_id}").json()["status"] == "PROVISIONING"
            server.admin.advance(65)
            assert api.get(f"/v2/pods/{pod_id}").json()["runtime"] is not None
    finally:
        server.stop()
