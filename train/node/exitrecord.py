"""The node's exit record: what a start script that ended says about how and why (#43).

Written once, by the start script's EXIT trap, whatever the way out (`die`, a failed command, the end of
training, SIGTERM). Stdlib only: it must work on an image whose torch, boto3 or packages are broken, which is
exactly when it matters.

    {"version": 1, "node": "<pod id>", "rank": 0, "pod_index": 0, "job": "<job>", "run_id": "<run id>",
     "status": "failed" | "finished" | "stopped",
     "phase": "identity" | "secrets" | "health_gate" | "disk" | "preflight" | "resume" | "training"
              | "sync" | "finish",
     "exit_status": 127, "reason": "preflight failed (exit 127); see above",
     "log_tail": ["...", "..."],   # the log's last lines (at most TAIL_LINES of TAIL_CHARS), secrets scrubbed
     "at": 1764660000.0}           # the node's wall clock: shown, never compared with the supervisor's

Where it lands (both when it can):
- `<workdir>/metrics/exit-node-<pod index>.<pod id>.json` on the node, read over SSH by `scripts/watch` and
  `scripts/supervise` (a stack without a bucket still has it);
- `s3://<bucket>/run/<run id>/exit/<rank>.json` for a failed node, when the stack has a bucket and boto3
  imports.

`parse` is the reader's side: an untrusted JSON document in, an `ExitRecord` or None out (never raises).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
STATUSES = ("failed", "finished", "stopped")
PHASES = (
    "identity",
    "secrets",
    "health_gate",
    "disk",
    "preflight",
    "resume",
    "training",
    "sync",
    "finish",
)
TAIL_LINES = 20
TAIL_CHARS = 300
REASON_CHARS = 500
# What looks like a credential even when its variable is not among the declared secrets.
_CREDENTIAL = re.compile(
    r"(?i)((?:aws_secret_access_key|aws_session_token|api[_-]?key|token|password|secret)\s*[=:]\s*)\S+"
    r"|\bAKIA[0-9A-Z]{16}\b|\brpa_[A-Za-z0-9]{8,}\b|\bhf_[A-Za-z0-9]{8,}\b|\bgh[pousr]_[A-Za-z0-9]{8,}\b"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x1b]")


@dataclass(frozen=True)
class ExitRecord:
    status: str
    phase: str
    exit_status: int
    reason: str
    node: str = ""
    rank: int = 0
    pod_index: int = 0
    job: str = ""
    run_id: str = ""
    log_tail: list[str] = field(default_factory=list)
    at: float | None = None
    version: int = VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def local_name(pod_index: int, node: str) -> str:
    return f"exit-node-{pod_index}.{node}.json"


def bucket_key(run_id: str, rank: int) -> str:
    return f"run/{run_id}/exit/{rank}.json"


def scrub(line: str, secrets: list[str]) -> str:
    """One log line made safe to show: no secret value, no credential-looking token, no control bytes."""
    for value in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        line = line.replace(value, "***")
    line = _CREDENTIAL.sub(lambda m: (m.group(1) or "") + "***", line)
    line = _CONTROL.sub("", line)
    return line if len(line) <= TAIL_CHARS else line[: TAIL_CHARS - 1] + "…"


def tail(path: Path, secrets: list[str], lines: int = TAIL_LINES) -> list[str]:
    """The last lines of a log, scrubbed; [] when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            last = deque((ln.rstrip("\n") for ln in f), maxlen=lines)
    except OSError:
        return []
    return [scrub(ln, secrets) for ln in last if ln.strip()]


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse(obj: Any) -> ExitRecord | None:
    """A record read from a node or the bucket; None when it is not one (wrong version, bad field)."""
    if isinstance(obj, str | bytes):
        try:
            obj = json.loads(obj)
        except ValueError:
            return None
    if not isinstance(obj, dict) or obj.get("version") != VERSION:
        return None
    status, phase = obj.get("status"), obj.get("phase")
    exit_status, rank, pod_index = (
        _int(obj.get("exit_status")),
        _int(obj.get("rank")),
        _int(obj.get("pod_index")),
    )
    if status not in STATUSES or phase not in PHASES or exit_status is None:
        return None
    raw_tail = obj.get("log_tail")
    log_tail = (
        [scrub(x, []) for x in raw_tail[-TAIL_LINES:] if isinstance(x, str)]
        if isinstance(raw_tail, list)
        else []
    )
    at = obj.get("at")
    return ExitRecord(
        status=status,
        phase=phase,
        exit_status=exit_status,
        reason=scrub(str(obj.get("reason") or ""), [])[:REASON_CHARS],
        node=str(obj.get("node") or "")[:100],
        rank=rank if rank is not None and rank >= 0 else 0,
        pod_index=pod_index if pod_index is not None and pod_index >= 0 else 0,
        job=str(obj.get("job") or "")[:100],
        run_id=str(obj.get("run_id") or "")[:200],
        log_tail=log_tail,
        at=float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None,
    )


def status_for(exit_status: int, phase: str, stopped: bool) -> str:
    if stopped or exit_status == 143:
        return "stopped"
    return "finished" if exit_status == 0 and phase in ("training", "sync", "finish") else "failed"


def build(
    env: dict[str, str], exit_status: int, phase: str, reason: str, log: Path | None, clock: float
) -> ExitRecord:
    secrets = [env.get(n, "") for n in env.get("TRAINSTACK_SECRET_NAMES", "").split()]
    secrets += [env.get(n, "") for n in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "RUNPOD_API_KEY")]
    secrets = [s for s in secrets if s]
    stopped = (
        os.path.exists(env.get("TRAINSTACK_STOP_FILE", "")) if env.get("TRAINSTACK_STOP_FILE") else False
    )
    phase = phase if phase in PHASES else "identity"

    def num(name: str) -> int:
        v = env.get(name, "")
        return int(v) if v.isdigit() else 0

    return ExitRecord(
        status=status_for(exit_status, phase, stopped),
        phase=phase,
        exit_status=exit_status,
        reason=scrub(reason, secrets)[:REASON_CHARS],
        node=env.get("RUNPOD_POD_ID") or env.get("HOSTNAME", ""),
        rank=num("NODE_RANK"),
        pod_index=num("TRAINSTACK_POD_INDEX"),
        job=env.get("TRAINSTACK_JOB", ""),
        run_id=env.get("TRAINSTACK_RUN_ID", ""),
        log_tail=tail(log, secrets) if log else [],
        at=clock,
    )


def write(record: ExitRecord, metrics_dir: Path, env: dict[str, str]) -> list[str]:
    """Land the record on the node (atomic rename) and, when the stack has a bucket, in it. Never raises."""
    said: list[str] = []
    try:
        metrics_dir.mkdir(parents=True, exist_ok=True)
        target = metrics_dir / local_name(record.pod_index, record.node)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(record.to_json(), encoding="utf-8")
        os.replace(tmp, target)
        said.append(f"exit record: {target}")
    except OSError as e:
        said.append(f"exit record not written on the node: {e.strerror}")
    bucket = env.get("TRAINSTACK_CHECKPOINT_BUCKET")
    # Only a failed node's record goes to the bucket: a finished run has its state record there already, and
    # a stopped node (SIGTERM) is being taken away, when a late write would race the bucket's own teardown.
    if bucket and env.get("TRAINSTACK_DRY_RUN") != "1" and record.run_id and record.status == "failed":
        try:
            import boto3  # absent on a broken image: the node's copy stands

            s3 = boto3.client("s3", endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or None)
            key = bucket_key(record.run_id, record.rank)
            s3.put_object(
                Bucket=bucket, Key=key, Body=record.to_json().encode(), ContentType="application/json"
            )
            said.append(f"exit record: s3://{bucket}/{key}")
        except Exception as e:  # best effort by design: the node copy is the fallback
            said.append(f"exit record not written to the bucket ({type(e).__name__})")
    return said


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m train.node.exitrecord",
        description="Write this node's exit record (called once by the start script's EXIT trap).",
    )
    p.add_argument("--exit-status", type=int, required=True, help="the start script's exit status")
    p.add_argument("--phase", required=True, choices=PHASES, help="the phase the script was in")
    p.add_argument("--reason", default="", help="the FATAL message, if any")
    p.add_argument("--log", type=Path, help="the start script's log, for its last lines")
    p.add_argument("--metrics-dir", type=Path, required=True, help="<workdir>/metrics")
    a = p.parse_args(argv)
    env = dict(os.environ)
    record = build(env, a.exit_status, a.phase, a.reason, a.log, time.time())
    for line in write(record, a.metrics_dir, env):
        if "not written" in line:  # the log stays as it was when all went well
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
