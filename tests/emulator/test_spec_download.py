"""The first local RunPod start downloads RunPod's v2 spec into the cache, checked against the pinned sha256;
offline, it says in one line how to provide the file. Served here by a real HTTP server on loopback."""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator import spec_download
from emulator.spec_download import SPEC_SHA256, SPEC_URL, SpecUnavailable, download
from harness.pulumi_cli import REPO

REFERENCE = REPO.parent / "shared" / "reference" / "runpod" / "openapi-v2.json"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server for a folder; yields (base URL, folder)."""
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_the_pin_is_runpods_published_file() -> None:
    assert SPEC_URL.startswith("https://raw.githubusercontent.com/runpod/docs/")
    assert SPEC_URL.endswith(f"/{spec_download.SPEC_COMMIT}/api-reference-v2/openapi.json")
    if not REFERENCE.is_file():
        pytest.skip("no reference copy beside the repo")
    assert hashlib.sha256(REFERENCE.read_bytes()).hexdigest() == SPEC_SHA256


def test_download_keeps_a_file_with_the_pinned_sha256(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    body = b'{"openapi": "3.1.0", "paths": {}}'
    (root / "openapi.json").write_bytes(body)
    dest = tmp_path / "cache" / "openapi-v2.json"
    assert download(dest, f"{base}/openapi.json", hashlib.sha256(body).hexdigest()) == dest
    assert dest.read_bytes() == body
    assert [p.name for p in dest.parent.iterdir()] == ["openapi-v2.json"]  # no partial file left


def test_a_file_with_another_sha256_is_not_kept(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    (root / "openapi.json").write_bytes(b'{"tampered": true}')
    dest = tmp_path / "cache" / "openapi-v2.json"
    with pytest.raises(SpecUnavailable, match="not the pinned"):
        download(dest, f"{base}/openapi.json")
    assert list(dest.parent.iterdir()) == []


def test_a_missing_file_and_no_network_each_say_how_to_provide_it(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    base, _ = served
    dest = tmp_path / "openapi-v2.json"
    with pytest.raises(SpecUnavailable, match="HTTP 404") as missing:
        download(dest, f"{base}/nowhere.json")
    # Port 9 (discard) on loopback refuses the connection: what an offline machine sees, within a second.
    with pytest.raises(SpecUnavailable, match="offline") as offline:
        download(dest, "http://127.0.0.1:9/openapi.json", timeout_s=5)
    for err in (missing, offline):
        text = str(err.value)
        assert "\n" not in text and "TRAINSTACK_OPENAPI_V2" in text and str(dest) in text
        assert SPEC_SHA256 in text
    assert not dest.exists()


@pytest.mark.services
def test_the_module_fills_an_empty_cache_from_the_url(served: tuple[str, Path], tmp_path: Path) -> None:
    # The command scripts/local-runpod runs, on a machine without any copy: it downloads into the cache.
    # The test server holds the reference copy so the real pin is checked end to end.
    if not REFERENCE.is_file():
        pytest.skip("no reference copy beside the repo")
    base, root = served
    (root / "openapi.json").write_bytes(REFERENCE.read_bytes())
    cache = tmp_path / "cache"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TRAINSTACK_CACHE": str(cache),
        "TRAINSTACK_OPENAPI_V2": str(tmp_path / "absent.json"),
        "TRAINSTACK_OPENAPI_V2_URL": f"{base}/openapi.json",
        "PYTHONPATH": str(REPO),
    }
    # The copy beside the repo would be found first: run from a tree where there is none.
    tree = tmp_path / "clone"
    (tree / "emulator").mkdir(parents=True)
    for name in ("__init__.py", "config.py", "keys.py", "spec_download.py"):  # what config.py imports too
        (tree / "emulator" / name).write_bytes((REPO / "emulator" / name).read_bytes())
    env["PYTHONPATH"] = f"{tree}:{REPO}"
    done = subprocess.run(
        [sys.executable, "-m", "emulator.spec_download"], cwd=tree, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cache / "openapi-v2.json")
    assert hashlib.sha256((cache / "openapi-v2.json").read_bytes()).hexdigest() == SPEC_SHA256
    assert "downloading RunPod's REST v2 spec" in done.stderr

    # Offline: one line naming what to do, exit 1.
    (cache / "openapi-v2.json").unlink()
    env["TRAINSTACK_OPENAPI_V2_URL"] = "http://127.0.0.1:9/openapi.json"
    failed = subprocess.run(
        [sys.executable, "-m", "emulator.spec_download"], cwd=tree, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("local-runpod: RunPod's REST v2 spec is not here") and "TRAINSTACK_OPENAPI_V2" in last
    )
