"""Checkpoint transfer between the node and the S3 bucket; checkpoints are immutable files named step-<n>.pt.

    python -m train.node.bucket resume|sync|newest

resume: fetch the bucket's newest checkpoint unless a local one is as new. sync: upload every local
checkpoint the bucket lacks. newest: upload only the newest local one, without listing the bucket (it runs
inside a spot pod's 5 s notice, and a re-upload is harmless). Reads TRAINSTACK_CHECKPOINT_BUCKET,
TRAINSTACK_CHECKPOINT_PREFIX and TRAINSTACK_CHECKPOINT_DIR; boto3 finds the credentials itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any

NAME_RE = re.compile(r"^step-(\d+)\.pt$")


def by_step(names: Iterable[str]) -> list[str]:
    """Checkpoint names in step order; other names are left out."""
    found = [(int(m.group(1)), n) for n in names if (m := NAME_RE.match(n))]
    return [n for _, n in sorted(found)]


def step_of(name: str) -> int:
    m = NAME_RE.match(name)
    assert m is not None, name
    return int(m.group(1))


def remote(s3: Any, bucket: str, prefix: str) -> list[str]:
    names: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        names += [obj["Key"][len(prefix) :] for obj in page.get("Contents", [])]
    return by_step(names)


def run(mode: str, s3: Any, bucket: str, prefix: str, local: str) -> list[str]:
    """Do one transfer; returns what it did, a line each."""
    here = by_step(os.listdir(local))
    if mode == "resume":
        there = remote(s3, bucket, prefix)
        if not there:
            return ["no checkpoint in the bucket: starting fresh"]
        if here and step_of(here[-1]) >= step_of(there[-1]):
            return [f"local {here[-1]} is as new as the bucket's {there[-1]}"]
        part = os.path.join(local, f".{there[-1]}.{os.getpid()}.part")
        s3.download_file(bucket, prefix + there[-1], part)
        os.replace(part, os.path.join(local, there[-1]))
        return [f"fetched {there[-1]} from the bucket"]
    have = set() if mode == "newest" else set(remote(s3, bucket, prefix))
    done = []
    for name in here[-1:] if mode == "newest" else here:
        if name not in have:
            s3.upload_file(os.path.join(local, name), bucket, prefix + name)
            done.append(f"uploaded {name}")
    return done


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in ("resume", "sync", "newest"):
        print("usage: python -m train.node.bucket resume|sync|newest", file=sys.stderr)
        return 2
    import boto3  # on the node only when a bucket is configured

    # boto3 honours AWS_ENDPOINT_URL_S3 itself; passing it keeps older boto3 on the same endpoint.
    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)
    prefix = os.environ["TRAINSTACK_CHECKPOINT_PREFIX"].rstrip("/") + "/"
    bucket, local = os.environ["TRAINSTACK_CHECKPOINT_BUCKET"], os.environ["TRAINSTACK_CHECKPOINT_DIR"]
    for line in run(args[0], s3, bucket, prefix, local):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
