"""The supervisor's memory for a stack without a checkpoint bucket: a directory on the machine that runs it.

The audit lines, the one-time notices, the lease and the recovery records live in the bucket when the stack
has one (supervisor/store.py). Without one, the rules that count rounds (idle, never started,
blind), the bound on recoveries and the once-per-run messages had nothing to read, and a failing pod was
replaced every round. `DirObjects` answers the few S3 calls those modules make
(`put_object` with its conditional writes, `get_object`, `list_objects_v2` and its paginator) over files, so
the same code keeps the same records here. It remembers only on this machine: run `scripts/supervise STACK`
(the loop) on one machine, or give the stack a bucket. Written here because no maintained library offers a
directory with S3's conditional-write semantics; moto's server is a test tool, not a store.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path
from typing import Any

LOCAL_BUCKET = "local-supervisor-memory"


class LocalStoreError(Exception):
    """Shaped as botocore's ClientError where the callers read it: `response["Error"]["Code"]`."""

    def __init__(self, code: str, key: str) -> None:
        super().__init__(f"{code}: {key}")
        self.response = {"Error": {"Code": code}}


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


class _Paginator:
    def __init__(self, store: DirObjects) -> None:
        self.store = store

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield self.store.list_objects_v2(**kwargs)


class DirObjects:
    """Objects as files under `root` (keys are relative paths); one writer at a time through a lock file."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise LocalStoreError("InvalidKey", key)
        return path

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **kw: Any) -> dict[str, Any]:
        path = self._path(Key)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = path.read_bytes() if path.exists() else None
            if kw.get("IfNoneMatch") == "*" and current is not None:
                raise LocalStoreError("PreconditionFailed", Key)
            if "IfMatch" in kw and (current is None or _etag(current) != kw["IfMatch"]):
                raise LocalStoreError("PreconditionFailed", Key)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(Body)
            tmp.replace(path)  # whole or not at all: a kill leaves the old object
        return {"ETag": _etag(Body)}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        path = self._path(Key)
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            raise LocalStoreError("NoSuchKey", Key) from None
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        date = formatdate(time.time(), usegmt=True)  # this machine's clock: the one its files are dated by
        return {
            "Body": io.BytesIO(body),
            "ETag": _etag(body),
            "LastModified": modified,
            "ResponseMetadata": {"HTTPHeaders": {"date": date}},
        }

    def list_objects_v2(
        self, *, Bucket: str, Prefix: str = "", StartAfter: str = "", **_kw: Any
    ) -> dict[str, Any]:
        if not self.root.is_dir():
            return {"Contents": []}
        found = []
        for path in self.root.rglob("*"):
            if not path.is_file() or path.name.startswith("."):
                continue
            key = path.relative_to(self.root).as_posix()
            if key.startswith(Prefix) and key > StartAfter:
                modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
                found.append({"Key": key, "LastModified": modified, "Size": path.stat().st_size})
        return {"Contents": sorted(found, key=lambda o: o["Key"])}

    def get_paginator(self, _name: str) -> _Paginator:
        return _Paginator(self)
