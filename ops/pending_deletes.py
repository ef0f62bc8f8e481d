"""Drop from a stack's state the pending deletes of checkpoint buckets whose S3 endpoint no longer answers.

Before endpoint changes became in-place updates, a new S3 endpoint (a local moto back on another port) made
Pulumi replace the bucket: create it at the new endpoint, then delete the old one at the old endpoint. When
the old endpoint is gone, that delete fails on every `up` and the stack is wedged. The bucket it names lived
only at that endpoint (or is the same bucket the state holds live now: deleting it through today's endpoint
would destroy the live one), so the pending delete is forgotten, never retried elsewhere.

    python -m ops.pending_deletes STACK --cwd WORKSPACE     (run by scripts/recover)
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from common import contract
from common.pulumi import PulumiError
from common.stack import Stack

BUCKET_TYPE = contract.BUCKET.type


def answers(url: str, timeout_s: float = 3.0) -> bool:
    """Whether anything accepts a TCP connection at the URL's host and port."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def stale(deployment: dict[str, Any], reachable: Callable[[str], bool] = answers) -> list[dict[str, Any]]:
    """Pending bucket deletes whose recorded endpoint does not answer."""
    return [
        r
        for r in deployment.get("resources") or []
        if r.get("delete") and r.get("type") == BUCKET_TYPE
        and not reachable(str((r.get("outputs") or {}).get("endpoint_url") or ""))
    ]  # fmt: skip


def without(deployment: dict[str, Any], dropped: list[dict[str, Any]]) -> dict[str, Any]:
    gone = {id(r) for r in dropped}
    return {**deployment, "resources": [r for r in deployment.get("resources") or [] if id(r) not in gone]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.pending_deletes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("stack")
    parser.add_argument("--cwd", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        forgotten = forget(args.stack, args.cwd)
    except PulumiError as exc:
        print(f"pending_deletes: {exc}", file=sys.stderr)
        return 1
    for line in forgotten:
        print(line, file=sys.stderr)
    return 0


def forget(stack: str, workspace: Path) -> list[str]:
    """Forget the stack's pending deletes of buckets whose S3 endpoint no longer answers (PulumiError when the
    state cannot be read or written back); a line per delete forgotten."""
    client = Stack(stack, workspace)
    state = client.export()
    dropped = stale(state.deployment)
    if dropped:
        client.import_state(state.with_deployment(without(state.deployment, dropped)))
    return [
        f"pending_deletes: forgot the pending delete of bucket {r.get('id')!r} at "
        f"{(r.get('outputs') or {}).get('endpoint_url')} (that endpoint no longer answers)"
        for r in dropped
    ]


if __name__ == "__main__":
    sys.exit(main())
