"""What keeps the supervisor going through an outage of what it reads (docs/SUPERVISOR.md, "Outages").

- `carry_spend`: the cap's bound while billing is unreadable, persisted in the supervisor's memory (the
  stack's bucket, or the local store without one) as `supervisor/<stack>/spend.json`: the last bill read,
  then each round without a bill adds the time since the previous round at the higher of the stack's $/h
  then and now. It is never limited to the rounds' history window (billing down for three hours still
  bounds the spend), and it carries across a recovery's replaced cluster (the record keeps every pod of
  the compute's lineage; a recovery begun since the lineage began continues it). A round that sees no
  compute closes it, so the next `scripts/up` starts from its own bill.
- `run_loop`: the rounds of `scripts/supervise STACK` (no --once). A round that raises, whatever it read, is
  one line with its reason and the next round runs; only Ctrl-C (or SIGTERM) ends the loop.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from supervisor.model import Observation, RoundRecord


def spend_key(stack: str) -> str:
    return f"supervisor/{stack}/spend.json"


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def why(exc: Exception) -> str:
    """An S3 error in a few words: its code, else its type (never its message: it may quote a URL)."""
    return _code(exc) or type(exc).__name__


def read_spend(mem: Any, bucket: str, stack: str) -> dict[str, Any] | None:
    """The persisted record, None where there is none. Raises when the store cannot be read."""
    try:
        body = mem.get_object(Bucket=bucket, Key=spend_key(stack))["Body"].read()
    except Exception as exc:
        if _code(exc) in {"NoSuchKey", "404", "NotFound"}:
            return None
        raise
    try:
        data = json.loads(body)
        float(data["usd"]), float(data["at"])
    except (ValueError, KeyError, TypeError):
        return None  # another version's record, or a torn one: the rule's own bounds still hold
    return data if isinstance(data, dict) else None


def carry_spend(
    mem: Any, bucket: str, stack: str, obs: Observation, write: bool = True
) -> tuple[Observation, str | None]:
    """The observation with `spend_bound_usd` set where billing did not answer and a bill was read before
    for this compute, and the record updated (not with `write` false: a dry run). Returns a problem line
    where the store could not be read or written (the round goes on with the rule's own bounds)."""
    try:
        prev = read_spend(mem, bucket, stack)
    except Exception as exc:
        return obs, f"spend record: not read ({why(exc)})"
    pods = set(obs.pods)
    lineage = set(prev.get("pods") or ()) if prev and not prev.get("closed") else set()
    since = float(prev.get("since") or prev["at"]) if prev else obs.at
    recovered = any(a.at >= since for a in (obs.fleet.attempts if obs.fleet else ()))
    continuing = bool(lineage) and bool(lineage & pods or recovered)
    bound: float | None = None
    record: dict[str, Any] | None
    if obs.nodes == 0:
        record = {"closed": True, "usd": 0.0, "at": obs.at} if lineage else None
    elif obs.spent_usd is not None:
        record = {
            "usd": obs.spent_usd,
            "at": obs.at,
            "billed_at": obs.at,
            "billed_usd": obs.spent_usd,
            "usd_per_hour": obs.usd_per_hour,
            "pods": sorted(pods | lineage) if continuing else sorted(pods),
            "since": since if continuing else obs.at,
        }
    elif continuing and prev is not None:
        rate = max(float(prev.get("usd_per_hour") or 0.0), obs.usd_per_hour)
        bound = float(prev["usd"]) + max(0.0, obs.at - float(prev["at"])) * rate / 3600
        # a round that read no price keeps the last one (never a bound that stops growing)
        record = {**prev, "usd": bound, "at": obs.at, "usd_per_hour": obs.usd_per_hour or rate}
        record["pods"] = sorted(pods | lineage)
    else:
        record = None  # no bill read for this compute yet: the rule bounds it by the compute's age
    if bound is not None:
        obs = replace(obs, spend_bound_usd=bound)
    if record is None or not write:
        return obs, None
    try:
        mem.put_object(
            Bucket=bucket,
            Key=spend_key(stack),
            Body=json.dumps(record, sort_keys=True).encode(),
            ContentType="application/json",
        )
    except Exception as exc:
        return obs, f"spend record: not written ({why(exc)})"
    return obs, None


def failed_line(exc: BaseException) -> str:
    """A round that raised, in one line: its type, message (cut) and where it was raised."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    return f"round failed: {type(exc).__name__}: {str(exc)[:300]}{at}"


def run_loop(
    round_once: Callable[[], RoundRecord],
    show: Callable[[RoundRecord], None],
    interval_s: Callable[[], float],
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    rounds: int | None = None,
) -> None:
    """Round after round until interrupted (`rounds`: a test's count). Nothing a round reads ends it: an
    exception is one line (its type, message and where it was raised) and the next round runs after the
    interval. The interval is the stack's, as last read; unreadable, the last one read stands."""
    last_interval = 300.0
    n = 0
    while rounds is None or n < rounds:
        n += 1
        try:
            show(round_once())
        except Exception as exc:  # the loop never dies of its inputs
            log(f"{failed_line(exc)}; the next round runs as usual")
        try:
            last_interval = interval_s()
        except Exception as exc:
            log(f"interval: not read ({type(exc).__name__}); keeping {last_interval / 60:g} min")
        if rounds is None or n < rounds:
            sleep(last_interval)
