"""Container image references: the grammar registries and RunPod accept, checked at preview.

The grammar is the one the OCI distribution project documents for `name[:tag][@digest]`
(https://github.com/distribution/reference/blob/main/reference.go, the grammar in its package comment):
an optional registry host (with a `.` or `:` in it, or `localhost`) and port, then `/`-separated lowercase
path components joined by `.`, `_`, `__` or dashes, a tag of at most 128 word characters, `.` or `-`, and a
digest `algorithm:hex` of 32 or more hex digits; the name is at most 255 characters.
"""

from __future__ import annotations

import re

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
_DOMAIN = re.compile(rf"{_HOST}(?::[0-9]+)?")
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
NAME_MAX = 255

_FIX = (
    "write it as [registry[:port]/]name[:tag][@sha256:<digest>], "
    "e.g. 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04'"
)


def _split(ref: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of a reference, tags and digests unchecked; None where absent."""
    name, at, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:  # a colon after the last '/' starts the tag (before it, it is a registry port)
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest if at else None


def _name_problem(name: str) -> str | None:
    first, slash, rest = name.partition("/")
    has_domain = bool(slash) and ("." in first or ":" in first or first == "localhost")
    if has_domain and not _DOMAIN.fullmatch(first):
        return f"its registry host {first!r} is not a host name with an optional port"
    path = rest if has_domain else name
    if not _PATH.fullmatch(path):
        return (
            "its name must be lowercase letters and digits in '/'-separated parts joined by '.', '_' or '-'"
        )
    if len(name) > NAME_MAX:
        return f"its name is longer than {NAME_MAX} characters"
    return None


def image_reference_problem(ref: str) -> str | None:
    """What is wrong with `ref` as a container image reference (ending with the fix), or None if valid."""
    name, tag, digest = _split(ref)
    problem = _name_problem(name)
    if problem is None and tag is not None and not _TAG.fullmatch(tag):
        problem = "its tag must be 1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
    if problem is None and digest is not None and not _DIGEST.fullmatch(digest):
        problem = "its digest must be <algorithm>:<hex>, e.g. sha256: and 64 hex digits"
    return None if problem is None else f"{ref!r} is not a valid image reference: {problem}; {_FIX}"
