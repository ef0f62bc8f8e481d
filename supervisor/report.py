"""`scripts/supervise STACK --report [--png FILE]`: the run's goodput ledger from the bucket.

Reads the stack's audit lines and recovery records, builds the ledger (supervisor/ledger.py), prints the
table and, with --png, writes the run's timeline (phases, step, recoveries).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from supervisor import store
from supervisor.ledger import build, inputs_from_rounds, plot_png, table, watch_line
from supervisor.model import Decision, Observation, RoundRecord
from supervisor.observe import read_config, stack_config
from supervisor.store import read_attempts

EXIT_UNREADABLE = 2


def show_report(
    stack: str,
    workspace: Path,
    png: Path | None = None,
    s3: object = None,
    read: Callable[[Path, str], dict[str, Any]] = read_config,
) -> int:
    raw = read(workspace, stack)
    config = stack_config(raw)
    if config.bucket is None:
        print(
            f"scripts/supervise: stack '{stack}' has no bucket, so no audit lines to report", file=sys.stderr
        )
        return EXIT_UNREADABLE
    if s3 is None:
        s3 = store.make_s3(config)
    rounds = store.read_audit(s3, config.bucket.name, stack)
    attempts = read_attempts(s3, config.bucket.name, stack, since=0.0)
    if not rounds:
        print(f"scripts/supervise: no audit lines for '{stack}' yet (no round has run)", file=sys.stderr)
        return 0
    inputs = inputs_from_rounds(rounds, attempts, config.cluster.gpus_per_node)
    ledger = build(inputs)
    print(f"goodput ledger of {stack} ({len(rounds)} rounds, {len(attempts)} recoveries)")
    print(table(ledger))
    for a in attempts:
        print(f"  recovery {a.kind} at {a.at:.0f}: {a.outcome}: {a.what}")
    if png is not None:
        plot_png(inputs, ledger, str(png), stack)
        print(f"timeline: {png}")
    return 0


def ledger_note(s3: Any, bucket: str | None, stack: str, config: Any, obs: Observation) -> str:
    """'; goodput ...' for the run summary message: the ledger of every round so far and this one."""
    if s3 is None or not bucket:
        return ""
    try:
        rounds = [*store.read_audit(s3, bucket, stack), RoundRecord(stack, obs, Decision("none", "now"))]
        attempts = read_attempts(s3, bucket, stack, since=0.0)
    except Exception as exc:  # the summary goes out without the ledger rather than not at all
        return f"; no ledger ({type(exc).__name__})"
    return "; " + build(inputs_from_rounds(rounds, attempts, config.cluster.gpus_per_node)).line()


def ledger_line(
    stack: str,
    workspace: Path,
    s3: Any = None,
    read: Callable[[Path, str], dict[str, Any]] = read_config,
) -> str | None:
    """scripts/watch's ledger line of the run so far, from the stack's bucket (its audit lines and recovery
    records); None when the stack has no bucket or no round has run yet."""
    config = stack_config(read(workspace, stack))  # its config alone: the outputs are not needed
    if config.bucket is None:
        return None
    if s3 is None:
        s3 = store.make_s3(config)
    rounds = store.read_audit(s3, config.bucket.name, stack)
    if not rounds:
        return None
    attempts = read_attempts(s3, config.bucket.name, stack, since=0.0)
    return watch_line(build(inputs_from_rounds(rounds, attempts, config.cluster.gpus_per_node)))


SILENT_ROUNDS = 2  # a supervisor silent longer than this many of its rounds is an alert


def supervisor_line(
    stack: str,
    workspace: Path,
    s3: Any = None,
    read: Callable[[Path, str], dict[str, Any]] = read_config,
    now: Callable[[], float] = time.time,
) -> tuple[str, bool] | None:
    """scripts/watch's line on the supervisor: the run's state as its last round saw it and its heartbeat's
    age (by the bucket's clock), and whether it is silent (past two rounds: an alert, red in watch). None
    when the stack has no bucket."""
    config = stack_config(read(workspace, stack))
    if config.bucket is None:
        return None
    if s3 is None:
        s3 = store.make_s3(config)
    beat = store.read_heartbeat(s3, config.bucket.name, stack, now())
    if beat is None:
        return (f"supervisor: no heartbeat yet (is anything running scripts/supervise {stack}?)", False)
    data, age = beat
    interval = float(data.get("interval_s") or config.supervisor.interval_min * 60)
    ago = f"{age:.0f} s" if age < 120 else f"{age / 60:.0f} min"
    state = data.get("state") or data.get("decision") or "?"
    reason = str(data.get("reason") or "")[:160]
    if age > SILENT_ROUNDS * interval:
        line = (
            f"supervisor silent: its last heartbeat is {ago} old, more than {SILENT_ROUNDS} rounds of "
            f"{interval / 60:g} min; nothing guards {stack} now (its last round: {state}: {reason})"
        )
        return line, True
    return f"supervisor: {state}: {reason} (heartbeat {ago} ago, every {interval / 60:g} min)", False


def released_summary(
    stack: str,
    workspace: Path,
    s3: Any = None,
    read: Callable[[Path, str], dict[str, Any]] = read_config,
) -> dict[str, Any] | None:
    """The run as the supervisor left it, for scripts/watch once the compute is gone: the round that released
    it (why, steps, spent vs forecast, the summary message) and the run's goodput ledger. None when the stack
    has no bucket or no round of the supervisor released anything."""
    from supervisor.act import summary_text  # pure: the text of the release's message

    config = stack_config(read(workspace, stack))
    if config.bucket is None:
        return None
    if s3 is None:
        s3 = store.make_s3(config)
    rounds = store.read_audit(s3, config.bucket.name, stack)
    released = [r for r in rounds if "release" in r.done]
    if not released:
        return None
    last = released[-1]
    o = last.observation
    attempts = read_attempts(s3, config.bucket.name, stack, since=0.0)
    ledger = watch_line(build(inputs_from_rounds(rounds, attempts, config.cluster.gpus_per_node)))
    steps = [r.last_step for r in o.runs if r.last_step is not None]
    return {
        "stack": stack,
        "state": "released",
        "released_at": o.at,
        "why": last.decision.reason,
        "ended_as": last.decision.state or last.decision.kind,
        "steps": max(steps) if steps else o.step,
        "spent_usd": o.spent_usd,
        "forecast_usd": o.forecast_usd,
        "goodput": ledger,
        "summary": summary_text(o, config.training.max_run_hours, last.decision.reason),
    }
