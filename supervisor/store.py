"""The supervisor's side of the checkpoint bucket: the lease, the audit lines, and verifying a run's state.

Keys (docs/SUPERVISOR.md):

    run/<run id>/state.json                 the run's own record, by the job's rank 0 (train/node/transfer.py)
    supervisor/<stack>/lease.json           who may act now: {holder, ttl_s}, judged by the bucket's clock
    supervisor/<stack>/spend.json           the spend bound while billing is unreadable (supervisor/outage.py)
    supervisor/<stack>/heartbeat.json       the last round's state and decision, overwritten every round
    supervisor/<stack>/audit/<time>-<holder>.json   one JSON line per round

The lease is taken with S3 conditional writes: `If-None-Match: *` creates it only where there is none, and
`If-Match: <etag>` takes over an expired one only if nobody changed it since it was read; of two
supervisors racing, S3 lets exactly one write succeed (PreconditionFailed or ConditionalRequestConflict
for the other). It is never deleted: giving it back writes it expired. Nothing here deletes anything.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from supervisor.faults import Attempt
from supervisor.model import RoundRecord, RunState
from train.node.transfer import object_sha256, state_key

if TYPE_CHECKING:
    from stackconfig.config import StackConfig

LEASE_TTL_S = 600.0  # a holder killed mid-action blocks others this long at most
_LOST = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}


def make_s3(config: StackConfig) -> Any:
    """A boto3 client for the stack's bucket (endpoint: trainstack:s3EndpointUrl, else the AWS env)."""
    import boto3

    endpoint = config.s3_endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or None
    region = config.bucket.region if config.bucket else None
    return boto3.client("s3", region_name=region, endpoint_url=endpoint)


def lease_key(stack: str) -> str:
    return f"supervisor/{stack}/lease.json"


def audit_prefix(stack: str) -> str:
    return f"supervisor/{stack}/audit/"


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _missing(exc: Exception) -> bool:
    return _code(exc) in {"NoSuchKey", "404", "NotFound"}


@dataclass
class Lease:
    """The right to act on one stack for `ttl_s`; `acquire` says whether this holder has it now."""

    s3: Any
    bucket: str
    stack: str
    holder: str
    ttl_s: float = LEASE_TTL_S
    clock: Callable[[], float] = time.time
    etag: str | None = None
    held_by: str = ""  # after a lost acquire: who holds it

    def _put(self, body: dict[str, Any], **condition: str) -> bool:
        try:
            answer = self.s3.put_object(
                Bucket=self.bucket, Key=lease_key(self.stack), Body=json.dumps(body).encode(), **condition
            )
        except Exception as exc:
            if _code(exc) in _LOST:
                return False
            raise
        self.etag = answer.get("ETag")
        return True

    def acquire(self) -> bool:
        """Judged by one clock, the bucket's: a lease is held while its object is younger than `ttl_s` by the
        bucket's own time (the answer's Date against the object's Last-Modified), never by the holder's
        `expires_at` against ours (a holder whose clock ran two hours ahead would block everyone two hours;
        one behind would be taken over while it acts). Without a Date header, this machine's clock stands
        in for the bucket's; the holder's clock is never read."""
        now = self.clock()
        mine = {"holder": self.holder, "expires_at": now + self.ttl_s, "taken_at": now, "ttl_s": self.ttl_s}
        try:
            current = self.s3.get_object(Bucket=self.bucket, Key=lease_key(self.stack))
        except Exception as exc:
            if not _missing(exc):
                raise
            return self._put(mine, IfNoneMatch="*")
        data = json.loads(current["Body"].read() or b"{}")
        if data.get("holder") != self.holder and held(current, data, now, self.ttl_s):
            self.held_by = str(data.get("holder"))
            return False
        return self._put(mine, IfMatch=current["ETag"])

    def give_back(self) -> None:
        """Mark it expired (never a delete), only if it is still ours."""
        if self.etag is not None:
            self._put(
                {"holder": self.holder, "expires_at": 0, "given_back_at": self.clock()}, IfMatch=self.etag
            )
            self.etag = None


def bucket_now(answer: dict[str, Any], fallback: float) -> float:
    """The bucket's time of an answer (its HTTP Date header), else `fallback`."""
    date = (answer.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    if date:
        try:
            return parsedate_to_datetime(str(date)).timestamp()
        except (TypeError, ValueError):
            pass
    return fallback


def held(answer: dict[str, Any], data: dict[str, Any], now: float, ttl_s: float) -> bool:
    """A lease object (`answer`: get_object's, `data`: its body) still held by its writer."""
    if "given_back_at" in data or data.get("expires_at") == 0:
        return False  # given back: written expired by its holder
    modified = answer.get("LastModified")
    if modified is None:  # a store that does not say when it was written: the holder's word, as before
        return float(data.get("expires_at") or 0) > now
    age = bucket_now(answer, now) - float(modified.timestamp())
    return age < ttl_s


def heartbeat_key(stack: str) -> str:
    return f"supervisor/{stack}/heartbeat.json"


def write_heartbeat(s3: Any, bucket: str, record: RoundRecord, interval_s: float) -> None:
    """The supervisor's sign of life, overwritten every round: what it saw and decided. Its age is read by the
    bucket's clock (`read_heartbeat`), never from `round_at`."""
    o, d = record.observation, record.decision
    body = {
        "holder": record.holder,
        "round_at": o.at,
        "interval_s": interval_s,
        "state": d.state,
        "decision": d.kind,
        "reason": d.reason,
        "step": o.step,
        "spent_usd": o.spent_usd,
        "usd_per_hour": o.usd_per_hour,
        "done": list(record.done),
        "errors": list(record.errors),
    }
    s3.put_object(
        Bucket=bucket,
        Key=heartbeat_key(record.stack),
        Body=json.dumps(body, sort_keys=True, default=str).encode(),
        ContentType="application/json",
    )


def read_heartbeat(s3: Any, bucket: str, stack: str, now: float) -> tuple[dict[str, Any], float] | None:
    """The last heartbeat and its age in seconds by the bucket's clock; None when no round wrote one."""
    try:
        answer = s3.get_object(Bucket=bucket, Key=heartbeat_key(stack))
    except Exception as exc:
        if _missing(exc):
            return None
        raise
    data = json.loads(answer["Body"].read() or b"{}")
    modified = answer.get("LastModified")
    written = float(modified.timestamp()) if modified is not None else float(data.get("round_at") or now)
    return (data if isinstance(data, dict) else {}), max(0.0, bucket_now(answer, now) - written)


# Messages about the stack's run as a whole (the budget warning, a missing SSH key) are kept per run of the
# stack, which a replaced cluster or an ended trial does not end; it ends with its compute (`end_run`). Every
# other key names what it is about (a trial's run, an outage's first round) and is kept per stack.
RUN_NOTICES = ("over_budget:", "unreachable:no_key")
_RUNS = "runs/"  # under the stack's notices: runs/current.json (the run's number), runs/<n>/<key>.json


def notices_prefix(stack: str) -> str:
    """Where one-time messages are kept: the stack's, its runs' under `runs/<n>/`."""
    return f"supervisor/{stack}/notices/about/"


def _current_run(s3: Any, bucket: str, stack: str) -> int:
    """The number of the stack's run (0 until a run has ended)."""
    try:
        answer = s3.get_object(Bucket=bucket, Key=f"{notices_prefix(stack)}{_RUNS}current.json")
    except Exception as exc:
        if _missing(exc):
            return 0
        raise
    data = json.loads(answer["Body"].read() or b"{}")
    run = data.get("run") if isinstance(data, dict) else None
    return run if isinstance(run, int) and run >= 0 else 0


def _listed(s3: Any, bucket: str, prefix: str) -> list[str]:
    try:  # advice: without it a message may be sent twice, never lost
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    except Exception:
        listed = []
    return [obj["Key"][len(prefix) :].removesuffix(".json") for obj in listed]


def read_notices(s3: Any, bucket: str, stack: str, run_ids: tuple[str, ...]) -> tuple[str, ...]:
    """The one-time messages already sent: the stack's and its current run's (`run_ids`: unused since #63,
    a set of run ids is no run: a replaced cluster or an ended trial changes it)."""
    try:
        run = _current_run(s3, bucket, stack)
    except Exception:  # advice, as above
        run = 0
    found: list[str] = []
    for key in _listed(s3, bucket, notices_prefix(stack)):
        if not key.startswith(_RUNS):
            found.append(key)
        elif key.startswith(f"{_RUNS}{run}/"):
            found.append(key.removeprefix(f"{_RUNS}{run}/"))
    return tuple(sorted(found))


def write_notice(s3: Any, bucket: str, stack: str, run_ids: tuple[str, ...], key: str, at: float) -> None:
    """Record a message as sent: under the stack's current run for one about the run, else the stack's."""
    safe = "".join(c if c.isalnum() or c in "._:-@" else "_" for c in key)
    where = f"{_RUNS}{_current_run(s3, bucket, stack)}/" if key.startswith(RUN_NOTICES) else ""
    s3.put_object(
        Bucket=bucket,
        Key=f"{notices_prefix(stack)}{where}{safe}.json",
        Body=json.dumps({"key": key, "at": at}).encode(),
        ContentType="application/json",
    )


def end_run(s3: Any, bucket: str, stack: str, at: float) -> bool:
    """No compute (or released): the run is over, the next is warned anew. Only a run that sent a message
    is ended, so repeated rounds without compute change nothing; True when it ended one."""
    run = _current_run(s3, bucket, stack)
    if not _listed(s3, bucket, f"{notices_prefix(stack)}{_RUNS}{run}/"):
        return False
    s3.put_object(
        Bucket=bucket,
        Key=f"{notices_prefix(stack)}{_RUNS}current.json",
        Body=json.dumps({"run": run + 1, "at": at}).encode(),
        ContentType="application/json",
    )
    return True


def stamp(ts: float) -> str:
    """A time as the sortable UTC stamp of the supervisor's object keys."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def write_audit(s3: Any, bucket: str, record: RoundRecord) -> str:
    """One object per round, named by its time so a listing is in time order."""
    holder = "".join(c if c.isalnum() or c in "-_." else "-" for c in record.holder)[:60]
    key = f"{audit_prefix(record.stack)}{stamp(record.observation.at)}-{holder}.json"
    line = json.dumps(record.to_json(), sort_keys=True, default=str)
    s3.put_object(Bucket=bucket, Key=key, Body=(line + "\n").encode(), ContentType="application/x-ndjson")
    return key


# A supervisor whose clock ran ahead writes lines dated in the future; once that date passes, its stale
# observation would pose as a recent round and cut every episode a rule counts back. The bucket's
# own time of each write orders the lines as they happened: a line dated more than this after a line the
# bucket wrote later came from a clock that ran ahead, and is left out. Relative, so a test's or the storm's
# clock (ahead of the bucket's, but moving with it) is no skew; the margin covers a round whose line is
# written after a long action (a Pulumi update) while another supervisor's round was recorded meanwhile.
MAX_AHEAD_S = 900.0


def plausible(lines: list[tuple[RoundRecord, float | None]]) -> list[RoundRecord]:
    """The lines (record, the bucket's time of its write) whose date no later write contradicts."""
    timed = sorted((w, i) for i, (_r, w) in enumerate(lines) if w is not None)
    dropped: set[int] = set()
    later_min = float("inf")
    for _written, i in reversed(timed):  # newest write first: the smallest date written after this one
        at = lines[i][0].observation.at
        if later_min < at - MAX_AHEAD_S:
            dropped.add(i)
        later_min = min(later_min, at)
    return [r for i, (r, _w) in enumerate(lines) if i not in dropped]


def read_audit(s3: Any, bucket: str, stack: str, since: float | None = None) -> list[RoundRecord]:
    """The rounds recorded since `since` (all of them with None), oldest first; lines from a clock that ran
    ahead are left out (`plausible`)."""
    prefix = audit_prefix(stack)
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if since is not None:
        kwargs["StartAfter"] = prefix + stamp(since)
    out: list[tuple[RoundRecord, float | None]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(**kwargs):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            try:
                record = RoundRecord.from_json(json.loads(body))
            except (ValueError, KeyError, TypeError):
                continue  # a line of another version: history is advice, not a contract
            written = obj.get("LastModified")
            out.append((record, written.timestamp() if written is not None else None))
    return sorted(plausible(out), key=lambda r: r.observation.at)


def verify_run(s3: Any, bucket: str, run_id: str) -> RunState:
    """The run's state as the bucket holds it; `verified` only when the checkpoint it names is there with the
    same size and sha256. Never trusts the record's own figures."""
    try:
        raw = s3.get_object(Bucket=bucket, Key=state_key(run_id))["Body"].read()
    except Exception as exc:
        if _missing(exc):
            return RunState(run_id, "absent")
        return RunState(
            run_id, "unreadable", why=f"cannot read {state_key(run_id)} ({_code(exc) or type(exc).__name__})"
        )
    try:
        data = json.loads(raw)
        status = data["status"]
        if status not in ("finished", "failed"):
            raise ValueError(status)
    except (ValueError, KeyError, TypeError):
        return RunState(run_id, "unreadable", why=f"{state_key(run_id)} is not a run state")
    ckpt = data.get("checkpoint") if isinstance(data.get("checkpoint"), dict) else None
    state = RunState(
        run_id,
        status,
        exit_status=data.get("exit_status"),
        last_step=data.get("last_step"),
        final_loss=data.get("final_loss"),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
        checkpoint_key=ckpt.get("key") if ckpt else None,
        failure=data.get("failure") if isinstance(data.get("failure"), str) else None,
    )
    if status != "finished":
        return state
    why = _checkpoint_problem(s3, bucket, ckpt)
    return RunState(**{**state.__dict__, "verified": why is None, "why": why or ""})


def _checkpoint_problem(s3: Any, bucket: str, ckpt: dict[str, Any] | None) -> str | None:
    if not ckpt or not ckpt.get("key"):
        return "it names no checkpoint"
    key = str(ckpt["key"])
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if _missing(exc):
            return f"its checkpoint {key} is not in the bucket"
        raise
    if head["ContentLength"] != ckpt.get("size"):
        held, said = head["ContentLength"], ckpt.get("size")
        return f"its checkpoint {key} is {held} bytes in the bucket, the state says {said}"
    size, sha = object_sha256(s3, bucket, key)
    if sha != ckpt.get("sha256") or size != ckpt.get("size"):
        return f"the sha256 of {key} in the bucket is not the one the state records"
    return None


# The recoveries' records: one object per attempt, written by supervisor/act.py's Recoverer.
def recoveries_prefix(stack: str) -> str:
    return f"supervisor/{stack}/recoveries/"


def write_attempt(s3: Any, bucket: str, stack: str, attempt: Attempt) -> str:
    """Put (or overwrite: the key is the attempt's start) one attempt record."""
    key = f"{recoveries_prefix(stack)}{stamp(attempt.at)}.json"
    body = json.dumps(attempt.__dict__, sort_keys=True, default=list).encode()
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
    return key


def read_attempts(s3: Any, bucket: str, stack: str, since: float) -> list[Attempt]:
    """The attempts begun since `since` (a run's bound: its max_run_hours), oldest first."""
    prefix = recoveries_prefix(stack)
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, StartAfter=prefix + stamp(since)
    )
    for page in pages:
        for obj in page.get("Contents", []):
            try:
                out.append(
                    Attempt.from_json(json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()))
                )
            except (ValueError, KeyError, TypeError):
                continue  # another version's record: advice, not a contract
    return sorted(out, key=lambda a: a.at)
