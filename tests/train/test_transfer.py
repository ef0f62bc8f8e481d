"""Checkpoint transfer (moved out of the start script's bash into train/node/transfer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from train.node.transfer import by_step, run


class FakeS3:
    """The four client calls transfer.py makes, over a dict; fails on anything else by not having it."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_paginator(self, name: str) -> Any:
        assert name == "list_objects_v2"
        s3 = self

        class Pages:
            def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
                keys = sorted(k for k in s3.objects if k.startswith(Prefix))
                return [
                    {"Contents": [{"Key": k} for k in keys[:2]]},
                    {"Contents": [{"Key": k} for k in keys[2:]]},
                ]

        return Pages()

    def download_file(self, bucket: str, key: str, path: str) -> None:
        Path(path).write_bytes(self.objects[key])

    def upload_file(self, path: str, bucket: str, key: str) -> None:
        self.objects[key] = Path(path).read_bytes()


def test_step_order_is_numeric() -> None:
    assert by_step(["step-10.pt", "notes.txt", "step-9.pt", "step-00000011.pt"]) == [
        "step-9.pt",
        "step-10.pt",
        "step-00000011.pt",
    ]


def test_resume_sync_and_newest(tmp_path: Path) -> None:
    s3 = FakeS3({"p/job/step-5.pt": b"five", "p/job/step-12.pt": b"twelve", "p/other/step-99.pt": b"x"})
    assert run("resume", s3, "b", "p/job/", str(tmp_path)) == ["fetched step-12.pt from the bucket"]
    assert (tmp_path / "step-12.pt").read_bytes() == b"twelve"
    assert run("resume", s3, "b", "p/job/", str(tmp_path)) == [
        "local step-12.pt is as new as the bucket's step-12.pt"
    ]
    (tmp_path / "step-13.pt").write_bytes(b"13")
    (tmp_path / "step-14.pt").write_bytes(b"14")
    assert run("newest", s3, "b", "p/job/", str(tmp_path)) == ["uploaded step-14.pt"]
    assert run("sync", s3, "b", "p/job/", str(tmp_path)) == ["uploaded step-13.pt"]
    assert run("resume", FakeS3({}), "b", "p/job/", str(tmp_path)) == [
        "no checkpoint in the bucket: starting fresh"
    ]
