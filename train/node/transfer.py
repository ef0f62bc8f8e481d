"""Checkpoint transfer between the node and the S3 bucket; checkpoints are immutable files named step-<n>.pt.

    python -m train.node.transfer resume|sync|newest
    python -m train.node.transfer finish STATUS

resume: fetch the bucket's newest checkpoint unless a local one is as new. sync: upload every local
checkpoint the bucket lacks. newest: upload only the newest local one, without listing the bucket (it runs
inside a spot pod's 5 s notice, and a re-upload is harmless). finish (after the final sync, STATUS is
training's exit status): every node marks `run/<run id>/synced/<rank>`; the job's rank 0 waits for every
node's mark, then writes the run's own record `run/<run id>/state.json` (status, last step, the newest
checkpoint's key, size and sha256 as it is in the bucket), which scripts/supervise verifies before it calls
the run finished (docs/SUPERVISOR.md). Reads TRAINSTACK_CHECKPOINT_BUCKET, TRAINSTACK_CHECKPOINT_PREFIX,
TRAINSTACK_CHECKPOINT_DIR (finish: TRAINSTACK_RUN_ID, NODE_RANK, NUM_NODES, TRAINSTACK_PROGRESS_FILE,
TRAINSTACK_STARTED_AT, TRAINSTACK_FINISH_WAIT_S); boto3 finds the credentials itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from train.node.gcpause import collector_paused

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


def state_key(run_id: str) -> str:
    """Where a run's own record lives in the bucket (scripts/supervise reads the same key)."""
    return f"run/{run_id}/state.json"


def object_sha256(s3: Any, bucket: str, key: str, chunk: int = 8 << 20) -> tuple[int, str]:
    """Size and sha256 of an object as the bucket holds it, streamed (never whole in memory)."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    digest, size = hashlib.sha256(), 0
    for part in iter(lambda: body.read(chunk), b""):
        digest.update(part)
        size += len(part)
    return size, digest.hexdigest()


def _last_progress(path: str) -> dict[str, Any]:
    """The newest line of the training-progress file (docs/NODE-HEALTH.md), or {} without one."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        last = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}
    return last if isinstance(last, dict) else {}


def finish(
    s3: Any,
    bucket: str,
    prefix: str,
    status: int,
    env: Mapping[str, str],
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Mark this node synced; on the job's rank 0, wait for every node, then write the run's record."""
    run_id, rank, nodes = env["TRAINSTACK_RUN_ID"], int(env["NODE_RANK"]), int(env["NUM_NODES"])
    marks = f"run/{run_id}/synced/"
    s3.put_object(Bucket=bucket, Key=f"{marks}{rank}", Body=json.dumps({"status": status}).encode())
    if rank != 0:
        return [f"marked node {rank} synced"]
    deadline = clock() + float(env.get("TRAINSTACK_FINISH_WAIT_S") or 600)
    seen: set[str] = set()
    while True:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=marks)
        seen = {o["Key"][len(marks) :] for page in pages for o in page.get("Contents", [])}
        if len(seen) >= nodes or clock() >= deadline:
            break
        sleep(5)
    missing = sorted(set(map(str, range(nodes))) - seen)
    there = remote(s3, bucket, prefix)
    record: dict[str, Any] = {
        "version": 1,
        "run_id": run_id,
        "status": "finished" if status == 0 and not missing else "failed",
        "exit_status": status,
        "nodes_synced": nodes - len(missing),
        "nodes": nodes,
        "last_step": step_of(there[-1]) if there else None,
        "checkpoint": None,
        "final_loss": _last_progress(env.get("TRAINSTACK_PROGRESS_FILE", "")).get("loss"),
        "started_at": float(env["TRAINSTACK_STARTED_AT"]) if env.get("TRAINSTACK_STARTED_AT") else None,
        "finished_at": clock(),
        # the failure's cause from the log (train/node/diagnostics.py), for the retry decision
        "failure": env.get("TRAINSTACK_FAILURE") or None,
    }
    if there:
        size, sha = object_sha256(s3, bucket, prefix + there[-1])
        record["checkpoint"] = {"key": prefix + there[-1], "size": size, "sha256": sha}
    body = json.dumps(record, sort_keys=True).encode()
    s3.put_object(Bucket=bucket, Key=state_key(run_id), Body=body, ContentType="application/json")
    lost = f" (no sync mark from nodes {', '.join(missing)})" if missing else ""
    return [f"run state {record['status']} at step {record['last_step']}{lost}: {state_key(run_id)}"]


def _client() -> Any:
    """boto3's S3 client, made with the cyclic garbage collector paused and what it made then frozen out of
    later passes (as train/node/launch.py's import_torch): boto3's import and the S3 model's load make tens
    of thousands of long-lived objects and no garbage, and every sync of every node is a process that does
    this. Paired on the CPU test nodes' venv, `import boto3` and a client: 0.34-0.51 -> 0.26-0.30 CPU-s."""
    with collector_paused():
        import boto3  # on the node only when a bucket is configured

        # boto3 honours AWS_ENDPOINT_URL_S3 itself; passing it keeps older boto3 on the same endpoint.
        return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m train.node.transfer resume|sync|newest | finish STATUS"
    if not args or args[0] not in ("resume", "sync", "newest", "finish"):
        print(usage, file=sys.stderr)
        return 2
    if (args[0] == "finish") != (len(args) == 2) or (len(args) == 2 and not args[1].isdigit()):
        print(usage, file=sys.stderr)
        return 2
    s3 = _client()
    prefix = os.environ["TRAINSTACK_CHECKPOINT_PREFIX"].rstrip("/") + "/"
    bucket, local = os.environ["TRAINSTACK_CHECKPOINT_BUCKET"], os.environ["TRAINSTACK_CHECKPOINT_DIR"]
    if args[0] == "finish":
        for line in finish(s3, bucket, prefix, int(args[1]), os.environ):
            print(line, flush=True)
        return 0
    for line in run(args[0], s3, bucket, prefix, local):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
