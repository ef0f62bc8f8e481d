"""Fetch RunPod's REST v2 spec into the cache when no copy is found: a pinned file, checked like a lock entry.

The local RunPod validates requests against RunPod's own published OpenAPI document, which the repo does not
copy. On a machine with no copy (`TRAINSTACK_OPENAPI_V2`, `../shared/reference/...`, the cache; see
emulator/config.py), `scripts/local-runpod start` runs this module: it downloads the file RunPod publishes in
its docs repository at the commit pinned below, and keeps it only if its sha256 is the pinned one.

    python -m emulator.spec_download      exit 0 when a copy is in place, 1 with one line saying what to do
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import httpx

from common.cachedir import cache_dir
from emulator.config import spec_candidates

# github.com/runpod/docs, api-reference-v2/openapi.json at commit 098c7fb ("sync API reference from Frontdoor
# v2.9.0", 2026-08-18). A new pin changes both lines together.
SPEC_COMMIT = "098c7fb0c6c374b1d053f896757a2282bf18e796"
SPEC_URL = f"https://raw.githubusercontent.com/runpod/docs/{SPEC_COMMIT}/api-reference-v2/openapi.json"
SPEC_SHA256 = "b8bce61c5a2290d28a7cb2ed53173637166817249986cb18b101b2fd651fd313"
_MAX_BYTES = 20 * 1024 * 1024  # the file is ~350 KB; anything far larger is not it


class SpecUnavailable(Exception):
    """The spec could not be fetched or did not match the pin; the message is one line saying what to do."""


def _how_to_provide(dest: Path) -> str:
    return (
        f"download {SPEC_URL} and save it as {dest} (or point TRAINSTACK_OPENAPI_V2 at a copy); "
        f"its sha256 must be {SPEC_SHA256}"
    )


def download(
    dest: Path,
    url: str = SPEC_URL,
    sha256: str = SPEC_SHA256,
    timeout_s: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Path:
    """Download `url` to `dest` if its sha256 matches; the file appears whole or not at all."""
    digest = hashlib.sha256()
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with (
            httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=True) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise SpecUnavailable(
                    f"RunPod's REST v2 spec: {url} answered HTTP {response.status_code}; "
                    f"{_how_to_provide(dest)}"
                )
            size = 0
            with tmp.open("wb") as out:
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > _MAX_BYTES:
                        raise SpecUnavailable(
                            f"RunPod's REST v2 spec: {url} is over 20 MB, not the pinned file"
                        )
                    digest.update(chunk)
                    out.write(chunk)
        if digest.hexdigest() != sha256:
            raise SpecUnavailable(
                f"RunPod's REST v2 spec from {url} has sha256 {digest.hexdigest()}, not the pinned {sha256}; "
                "nothing was saved (a changed upstream file needs a new pin in emulator/spec_download.py)"
            )
        tmp.replace(dest)
    except httpx.HTTPError as exc:
        raise SpecUnavailable(
            "RunPod's REST v2 spec is not here and could not be downloaded "
            f"({type(exc).__name__}; offline?): "
            f"{_how_to_provide(dest)}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def ensure(url: str | None = None) -> Path:
    """A spec copy that exists: the first candidate found, else a fresh download into the cache."""
    found = next((p for p in spec_candidates() if p.is_file()), None)
    if found is not None:
        return found
    url = url or os.environ.get("TRAINSTACK_OPENAPI_V2_URL") or SPEC_URL
    print(f"local-runpod: downloading RunPod's REST v2 spec (first run only) from {url}", file=sys.stderr)
    return download(cache_dir() / "openapi-v2.json", url)


def main() -> int:
    try:
        path = ensure()
    except SpecUnavailable as exc:
        print(f"local-runpod: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
