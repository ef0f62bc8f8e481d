"""`scripts/watch STACK [--once] [--json] [--every S]`: the running stack at a glance; exit 1 when critical.

scripts/watch prod            # live table, refreshed every 30 s (q or Ctrl-C to leave)
scripts/watch prod --once     # one table, then exit (1 if an alert is critical or a node unreachable)
scripts/watch prod --json     # one JSON document for scripts (implies --once)

Exit status: 0 fine, 1 critical (an alert, or a node nobody reaches), 2 bad use or an unreadable stack,
3 the stack is not up here (one line says so).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import select
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from common.stackname import stack_name_problem
from stackview import snapshot, sources
from watch.render import render

EXIT_CRITICAL = 1
EXIT_USAGE = 2
EXIT_NOT_UP = 3


def run_ledger(stack: str, cwd: Path) -> str | None:
    """The run's goodput ledger from the stack's bucket (issue #29, supervisor/report.py)."""
    from supervisor.report import ledger_line  # the supervisor's records load only when asked

    return ledger_line(stack, cwd)


def collect(
    stack: str,
    cwd: Path,
    outputs_of: Callable[[Path, str], dict[str, Any]] = sources.stack_outputs,
    ledger_of: Callable[[str, Path], str | None] | None = None,
) -> snapshot.WatchSnapshot:
    """Read every source once; each failure is kept as one line of `problems`. `ledger_of`: where the
    run's ledger line comes from (scripts/watch: `run_ledger`; None: not shown)."""
    outputs = outputs_of(cwd, stack)
    problems: list[str] = []
    ledger: str | None = None
    if ledger_of is not None:
        try:
            ledger = ledger_of(stack, cwd)
        except Exception as exc:  # the ledger is one more source: its failure is a problem line
            problems.append(f"ledger: {type(exc).__name__}: {str(exc)[:200]}")
    state: dict[str, Any] | None = None
    node0_answered = False
    try:
        state = sources.aggregator_state(stack, outputs)
    except sources.NoStateError as exc:
        node0_answered = True
        problems.append(f"aggregator: {exc}")
    except sources.WatchError as exc:
        problems.append(f"aggregator: {exc}")
    billed: float | None = None
    try:
        billed = sources.billed_usd(outputs)
    except Exception as exc:
        problems.append(f"billing: {exc}")
    forecast = outputs.get("forecast") if isinstance(outputs.get("forecast"), dict) else {}
    view = functools.partial(
        snapshot.build,
        stack=stack,
        now=time.time(),
        outputs=outputs,
        aggregator=state,
        billed_usd=billed,
        forecast_usd=(forecast or {}).get("run_cost_usd"),
        node0_answered=node0_answered,
        ledger=ledger,
    )
    # The snapshot decides who is unreachable (one rule); for those nodes the training log is read over SSH,
    # and RunPod's container log for a node SSH cannot reach either.
    first = view(logs={}, problems=problems).nodes
    # A node the aggregator did not see scraped may have ended: its exit record says how and why.
    exits = sources.exit_records(stack, outputs, [n.pod_id for n in first if n.reachable is not True])
    if exits and first and first[0].pod_id in exits:
        # node 0's start script ended, so its aggregator will never write: its message is noise here
        problems[:] = [p for p in problems if not p.startswith("aggregator: ")]
    view = functools.partial(view, exits=exits)
    unreachable = [n.pod_id for n in first if n.reachable is False and n.pod_id not in exits]
    logs: dict[str, list[str]] = {}
    sources_of: dict[str, str] = {}
    if unreachable:
        logs = sources.training_log_tails(stack, outputs, unreachable)
        sources_of = dict.fromkeys(logs, "training log")
        rest = [p for p in unreachable if p not in logs]
        if rest:
            try:
                runpod = sources.pod_logs(rest)
            except Exception as exc:
                problems.append(f"pod logs: {exc}")
            else:
                logs |= runpod
                sources_of |= dict.fromkeys(runpod, "RunPod log")
    snap = view(logs=logs, problems=problems, log_sources=sources_of)
    if sources.is_slurm_stack(outputs):
        snap = dataclasses.replace(snap, slurm_queue=tuple(sources.slurm_queue(stack, outputs)))
    return snap


@contextlib.contextmanager
def keys() -> Iterator[Callable[[float], str]]:
    """`pressed(timeout_s)`: the key pressed within the timeout ('' for none), the terminal in cbreak mode
    meanwhile (no echo, no Enter needed) and restored after; without a terminal it only waits."""
    if not sys.stdin.isatty():

        def wait(timeout_s: float) -> str:
            time.sleep(timeout_s)
            return ""

        yield wait
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def pressed(timeout_s: float) -> str:
        ready, _, _ = select.select([sys.stdin], [], [], timeout_s)
        return sys.stdin.read(1).lower() if ready else ""

    try:
        yield pressed
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/watch", description=__doc__.splitlines()[0])
    p.add_argument("stack")
    p.add_argument("--cwd", type=Path, required=True, help=argparse.SUPPRESS)  # scripts/watch sets it
    p.add_argument("--once", action="store_true", help="print once and exit")
    p.add_argument("--json", action="store_true", help="one JSON document (implies --once)")
    p.add_argument("--every", type=float, default=30.0, help="seconds between refreshes of the live view")
    args = p.parse_args(argv)
    bad_name = stack_name_problem(args.stack)  # scripts/watch asked too; `python -m watch` may be run bare
    if bad_name is not None:
        print(f"scripts/watch: {bad_name}", file=sys.stderr)
        return EXIT_USAGE
    if args.every < 1:
        print("scripts/watch: --every must be at least 1 second", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.json or args.once:
            snap = collect(args.stack, args.cwd, ledger_of=run_ledger)
            if args.json:
                print(json.dumps(snap.to_json(), indent=1, default=str))
            else:
                # Piped or captured output has no terminal width: give the table room instead of 80 columns.
                console = Console() if sys.stdout.isatty() else Console(width=160)
                console.print(render(snap))
            return EXIT_CRITICAL if snap.critical else 0
        console = Console()
        with Live(console=console, auto_refresh=False) as live, keys() as pressed:
            while True:
                snap = collect(args.stack, args.cwd, ledger_of=run_ledger)
                live.update(render(snap), refresh=True)
                if pressed(args.every) == "q":
                    return 0
    except sources.NotUpError as exc:
        print(f"scripts/watch: {exc}", file=sys.stderr)
        return EXIT_NOT_UP
    except sources.WatchError as exc:
        print(f"scripts/watch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
