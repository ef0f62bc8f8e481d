"""`scripts/watch STACK [--once] [--json] [--every S]`: the running stack at a glance; exit 1 when critical.

scripts/watch prod            # live table, refreshed every 30 s (q or Ctrl-C to leave)
scripts/watch prod --once     # one table, then exit (1 if an alert is critical or a node unreachable)
scripts/watch prod --json     # one JSON document for scripts (implies --once)
scripts/watch prod --reconcile-every 0   # do not look for billed resources no stack owns

Below the nodes it lists what the account bills that no stack's state holds (`scripts/reconcile`, read
only: nothing is deleted here), read at start and then every `--reconcile-every` minutes.

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

DESCRIPTION = "The running stack at a glance: its nodes, steps and money; exit 1 when critical."
EXAMPLES = "examples:\n" + "\n".join(f"  {line}" for line in (__doc__ or "").split("\n\n")[1].splitlines())
EXIT_CRITICAL = 1
EXIT_USAGE = 2
EXIT_NOT_UP = 3


def run_ledger(stack: str, cwd: Path) -> str | None:
    """The run's goodput ledger from the stack's bucket (supervisor/report.py)."""
    from supervisor.report import ledger_line  # the supervisor's records load only when asked

    return ledger_line(stack, cwd)


def run_heartbeat(stack: str, cwd: Path) -> tuple[str, bool] | None:
    """The supervisor's last round, its heartbeat's age and whether it is silent (supervisor/report.py)."""
    from supervisor.report import supervisor_line

    return supervisor_line(stack, cwd)


def run_released(stack: str, cwd: Path) -> dict[str, Any] | None:
    """The released run's summary from the supervisor's records; None when there is none or it cannot be
    read (watch then says the stack is not up, as before)."""
    from supervisor.report import released_summary

    if not cwd.is_dir():  # no workspace: never up here, so nothing was released here either
        return None
    try:
        return released_summary(stack, cwd)
    except Exception:  # the summary is a courtesy of a stack that is down: never an error of its own
        return None


def released_text(ended: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(ended["released_at"])))
    return f"{ended['stack']}: released at {when} by the supervisor. {ended['summary']}\n{ended['goodput']}"


RECONCILE_EVERY_MIN = 15.0  # how often the live view looks for unowned billed resources (a stack export each)


def account_unowned(cwd: Path, client: Any = None, now: float | None = None) -> tuple[dict[str, Any], ...]:
    """Every billed resource of the account that no stack's state holds: `scripts/reconcile`'s findings,
    read only (ops/reconcile.py). Raises when the account or a state cannot be read. `client`: a RunPod
    client to read with (None: `stackview.sources.view_client`, the short deadline of the view's other
    reads); `now`: the clock the ages are taken on (None: this machine's)."""
    from ops import reconcile  # the account-wide read loads only when asked
    from stackview.sources import view_client

    with contextlib.ExitStack() as owned:
        if client is None:  # the view's short deadline, as its other reads: never the providers' 180 s
            client = owned.enter_context(view_client())
        project, at = reconcile.project_name(cwd), time.time() if now is None else now
        found = reconcile.unowned(client, cwd, project=project, now=at)
    return tuple(
        {
            "kind": f.resource.kind,
            "id": f.resource.id,
            "name": f.resource.name,
            "usd_per_hour": f.resource.usd_per_hour,
            "age_s": f.age_s,
            "action": f.action,
            "line": reconcile.line(f),
        }
        for f in found
    )


class Every:
    """A slow source read at most once per `period_s` (on `clock`); between reads its last answer, or the
    last failure, stands. The live view refreshes every 30 s; the account-wide read is worth minutes."""

    def __init__(
        self,
        read: Callable[[Path], tuple[dict[str, Any], ...]],
        period_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._period_s, self._clock = read, period_s, clock
        self._at: float | None = None
        self._last: tuple[dict[str, Any], ...] | Exception = ()

    def __call__(self, cwd: Path) -> tuple[dict[str, Any], ...]:
        now = self._clock()
        if self._at is None or now - self._at >= self._period_s:
            self._at = now
            try:
                self._last = self._read(cwd)
            except Exception as exc:  # kept, and raised again until the next read
                self._last = exc
        if isinstance(self._last, Exception):
            raise self._last
        return self._last


def collect(
    stack: str,
    cwd: Path,
    outputs_of: Callable[[Path, str], dict[str, Any]] = sources.stack_outputs,
    ledger_of: Callable[[str, Path], str | None] | None = None,
    unowned_of: Callable[[Path], tuple[dict[str, Any], ...]] | None = None,
    heartbeat_of: Callable[[str, Path], tuple[str, bool] | None] | None = None,
) -> snapshot.WatchSnapshot:
    """Read every source once; each failure is kept as one line of `problems`. `ledger_of`: where the
    run's ledger line comes from (scripts/watch: `run_ledger`; None: not shown). `unowned_of`: where the
    account's unowned billed resources come from (`account_unowned`, or `Every` over it; None: not looked)."""
    outputs = outputs_of(cwd, stack)
    problems: list[str] = []
    unowned: tuple[dict[str, Any], ...] = ()
    if unowned_of is not None:
        try:
            unowned = unowned_of(cwd)
        except Exception as exc:  # one more source: its failure is a problem line, never the view's end
            problems.append(f"reconcile: {type(exc).__name__}: {str(exc)[:200]}")
    ledger: str | None = None
    if ledger_of is not None:
        try:
            ledger = ledger_of(stack, cwd)
        except Exception as exc:  # the ledger is one more source: its failure is a problem line
            problems.append(f"ledger: {type(exc).__name__}: {str(exc)[:200]}")
    if heartbeat_of is not None:  # the supervisor as it sees the run; silent past two rounds: a red line
        try:
            beat = heartbeat_of(stack, cwd)
        except Exception as exc:
            problems.append(f"supervisor heartbeat: {type(exc).__name__}: {str(exc)[:200]}")
        else:
            if beat is not None and beat[1]:
                problems.append(beat[0])
            elif beat is not None:
                ledger = f"{beat[0]}\n{ledger}" if ledger else beat[0]
    state: dict[str, Any] | None = None
    node0_answered = False
    ssh = sources.ViewSsh()  # a node that does not answer is waited for once in this view, not at each read
    try:
        state = sources.aggregator_state(stack, outputs, run=ssh)
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
    forecast_usd = sources.forecast_run_cost(outputs, problems)
    view = functools.partial(
        snapshot.build,
        stack=stack,
        now=time.time(),
        outputs=outputs,
        aggregator=state,
        billed_usd=billed,
        forecast_usd=forecast_usd,
        node0_answered=node0_answered,
        ledger=ledger,
    )
    # The snapshot decides who is unreachable (one rule); for those nodes the training log is read over SSH,
    # and RunPod's container log for a node SSH cannot reach either.
    first = view(logs={}, problems=problems).nodes
    # A node the aggregator did not see scraped may have ended: its exit record says how and why.
    exits = sources.exit_records(
        stack, outputs, [n.pod_id for n in first if n.reachable is not True], run=ssh
    )
    if exits and first and first[0].pod_id in exits:
        # node 0's start script ended, so its aggregator will never write: its message is noise here
        problems[:] = [p for p in problems if not p.startswith("aggregator: ")]
    view = functools.partial(view, exits=exits)
    unreachable = [n.pod_id for n in first if n.reachable is False and n.pod_id not in exits]
    logs: dict[str, list[str]] = {}
    sources_of: dict[str, str] = {}
    if unreachable:
        logs = sources.training_log_tails(stack, outputs, unreachable, run=ssh)
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
    return dataclasses.replace(snap, unowned=unowned)


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
    p = argparse.ArgumentParser(
        prog="scripts/watch", description=DESCRIPTION, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("stack", metavar="STACK", help="a stack that is up (stacks/Pulumi.STACK.yaml)")
    # The workspace: scripts/watch finds it (ops/cli.py); a bare `python -m watch STACK` the same way.
    p.add_argument("--cwd", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--once", action="store_true", help="print once and exit")
    p.add_argument("--json", action="store_true", help="one JSON document (implies --once)")
    p.add_argument("--every", type=float, default=30.0, help="seconds between refreshes of the live view")
    p.add_argument(
        "--reconcile-every",
        type=float,
        default=RECONCILE_EVERY_MIN,
        metavar="MIN",
        help="minutes between looks for billed resources no stack owns (0: never look)",
    )
    args = p.parse_args(argv)
    bad_name = stack_name_problem(args.stack)  # scripts/watch asked too; `python -m watch` may be run bare
    if bad_name is not None:
        print(f"scripts/watch: {bad_name}", file=sys.stderr)
        return EXIT_USAGE
    if args.every < 1:
        print("scripts/watch: --every must be at least 1 second", file=sys.stderr)
        return EXIT_USAGE
    if args.reconcile_every < 0:
        print("scripts/watch: --reconcile-every must be 0 (never) or more minutes", file=sys.stderr)
        return EXIT_USAGE
    from ops.cli import found_workspace

    found = found_workspace("scripts/watch", args.stack, args.cwd)
    if isinstance(found, int):
        return found
    args.cwd = found
    unowned_of = Every(account_unowned, args.reconcile_every * 60) if args.reconcile_every else None
    try:
        if args.json or args.once:
            snap = collect(
                args.stack, args.cwd, ledger_of=run_ledger, unowned_of=unowned_of, heartbeat_of=run_heartbeat
            )
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
                snap = collect(
                    args.stack,
                    args.cwd,
                    ledger_of=run_ledger,
                    unowned_of=unowned_of,
                    heartbeat_of=run_heartbeat,
                )
                live.update(render(snap), refresh=True)
                if pressed(args.every) == "q":
                    return 0
    except sources.NotUpError as exc:
        ended = run_released(args.stack, args.cwd)
        if ended is not None:  # released by the supervisor: the run's summary, not "run scripts/up first"
            print(json.dumps(ended, indent=1, default=str) if args.json else released_text(ended))
            return 0
        print(f"scripts/watch: {exc}", file=sys.stderr)
        return EXIT_NOT_UP
    except sources.WatchError as exc:
        print(f"scripts/watch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
