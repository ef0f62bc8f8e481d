"""The preview's AWS policy: read the state and the checkpoint buckets, nothing else.

`ops/iam/preview-policy.json` is the document (IAM policy language); this fills in the state backend's bucket
and prefix (`PULUMI_BACKEND_URL`, `s3://<bucket>[/<prefix>]`) and every stack's checkpoint bucket
(`trainstack:bucket.name` in `stacks/`), so what a team attaches to the preview's IAM user is what the test
proves (tests/ops/test_iam_policy.py, moto with IAM enforced; tests/e2e/test_preview_iam.py, the engine).

No lock: taking the state lock was asked for, but Pulumi's DIY backend takes none for a preview
(v3.274.1, pkg/backend/diy/backend.go: `Preview` goes straight to `apply`; `Update`, `Refresh`, `Destroy`
and a non-preview `Import` call `Lock`), and the engine test passes without it. Granting it would be worse
than useless: PutObject/DeleteObject under `.pulumi/locks/` lets the pull request's code delete a running
deploy's lock (two `up`s at once on one state) or plant one that blocks every deploy.

    python -m ops.iam_policy s3://team-state/trainstack     # the document, on stdout
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stackconfig.files import read_config, stack_names

TEMPLATE = Path(__file__).resolve().parent / "iam" / "preview-policy.json"
_BUCKETS = "${CHECKPOINT_BUCKET_ARNS}"


class PolicyError(ValueError):
    """The backend URL is not an S3 one: there is no AWS policy to write for it."""


def state_location(backend_url: str) -> tuple[str, str]:
    """(bucket, key prefix ending in "/" or empty) of an `s3://` backend URL."""
    parts = urlsplit(backend_url)
    if parts.scheme != "s3" or not parts.netloc:
        raise PolicyError(f"the preview policy is for an s3:// state backend; got {parts.scheme or '?'}://")
    prefix = parts.path.strip("/")
    return parts.netloc, f"{prefix}/" if prefix else ""


def checkpoint_buckets() -> list[str]:
    """Every stack's checkpoint bucket, as its stack file names it."""
    names = [(read_config(s).get("trainstack:bucket") or {}).get("name") for s in stack_names()]
    return sorted({str(n) for n in names if n})


def preview_policy(backend_url: str, buckets: Sequence[str]) -> dict[str, Any]:
    """The shipped document with the placeholders filled in (a statement's bucket list may be empty)."""
    bucket, prefix = state_location(backend_url)
    text = TEMPLATE.read_text(encoding="utf-8")
    text = text.replace("${STATE_BUCKET}", bucket).replace("${STATE_PREFIX}", prefix)
    document: dict[str, Any] = json.loads(text)
    arns = [f"arn:aws:s3:::{b}" for b in buckets]
    for statement in document["Statement"]:
        resources = [r for r in statement["Resource"] if r != _BUCKETS]
        if _BUCKETS in statement["Resource"]:
            resources += arns
        statement["Resource"] = resources
    document["Statement"] = [s for s in document["Statement"] if s["Resource"]]
    return document


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        print(json.dumps(preview_policy(args[0], checkpoint_buckets()), indent=2))
    except PolicyError as exc:
        print(f"iam_policy: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
