"""Credential shapes in plain-text config: found by documented token formats, reported by key path only.

A token pasted into a non-secret config value (`training.command`, an env value, a bucket prefix) would be
stored in the stack file in clear and copied into rendered start scripts and the state. Each pattern below
is a format its issuer documents; a match is refused with the key path and the kind of token, never the
value. Deliberately absent: bare 40-hex strings (W&B's key shape is also a git commit id) and bare 40-char
base64 (AWS's secret key shape is also ordinary data); those are caught only next to their variable name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    """One credential format: what to call it, how it looks, where its issuer documents it."""

    kind: str
    pattern: re.Pattern[str]
    source: str


SHAPES: tuple[Shape, ...] = (
    Shape(
        "Hugging Face token",
        re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
        "https://huggingface.co/docs/hub/security-tokens (user access tokens start with hf_)",
    ),
    Shape(
        "GitHub token",
        re.compile(r"(?<![A-Za-z0-9])(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
        "https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/",
    ),
    Shape(
        "AWS access key id",
        re.compile(r"(?<![A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
        "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids",
    ),
    Shape(
        "RunPod API key",
        re.compile(r"(?<![A-Za-z0-9])rpa_[A-Za-z0-9]{30,}"),
        "keys created in RunPod's console since 2024 start with rpa_ (https://docs.runpod.io/get-started/api-keys)",
    ),
    Shape(
        "private key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
        "RFC 7468 (textual encodings of PKIX, PKCS and CMS structures)",
    ),
    Shape(
        "credential assigned to a secret-named variable",
        # `WANDB_API_KEY=...`, `--hf_token=...`, `AWS_SECRET_ACCESS_KEY: ...` with a value of 16+ characters
        # that is not a RunPod secret reference ({{ RUNPOD_SECRET_<name> }}) or a shell variable.
        re.compile(
            r"(?i)(api[_-]?key|token|secret[_-]?access[_-]?key|password|passwd)[\"']?\s*[:=]\s*"
            r"[\"']?(?!\{\{|\$)[^\s\"']{16,}"
        ),
        "names W&B, AWS and most CLIs read credentials from (e.g. WANDB_API_KEY, AWS_SECRET_ACCESS_KEY)",
    ),
)


def credential_kind(value: str) -> str | None:
    """The kind of credential `value` contains, or None."""
    for shape in SHAPES:
        if shape.pattern.search(value):
            return shape.kind
    return None


def find_credentials(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(key path, kind) for every string inside `value` (maps, lists, scalars) that holds a credential;
    a map's keys are checked too (an env name can be pasted as `hf_...: x`)."""
    if isinstance(value, str):
        kind = credential_kind(value)
        if kind:
            yield path, kind
    elif isinstance(value, Mapping):
        for key, item in value.items():
            key_kind = credential_kind(str(key))
            if key_kind:  # the key itself is the credential: never put it in the path
                yield f"{path}.<key>", key_kind
            else:
                yield from find_credentials(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from find_credentials(item, f"{path}[{index}]")


def mask(value: str) -> str:
    """Enough of a value to recognise it by, never enough to use it: its first 3 characters and length."""
    return f"{value[:3]}… ({len(value)} characters)" if len(value) > 3 else "…"
