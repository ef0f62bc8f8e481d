"""`scripts/status [--json]`: every stack of the project (stacks/Pulumi.*.yaml), one line each: its state as
its supervisor last saw it, its nodes, $/h, spent, and the supervisor's heartbeat age (by the bucket's clock;
SILENT past two rounds). A stack that cannot be read is one line saying why, never the end of the listing.

Exit 0; 1 when a stack with compute up has a silent supervisor or none at all (nothing guards it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stackconfig import files
from supervisor import store
from supervisor.observe import read_stack, stack_config
from supervisor.report import SILENT_ROUNDS

REPO = Path(__file__).resolve().parents[1]
EXIT_UNGUARDED = 1


@dataclass(frozen=True)
class StackStatus:
    stack: str
    state: str  # the supervisor's last state (training, finished, released...), down, not up here, unreadable
    nodes: int = 0
    usd_per_hour: float = 0.0
    spent_usd: float | None = None  # as the supervisor's last round read it
    heartbeat_age_s: float | None = None
    silent: bool = False  # compute up and no heartbeat within two rounds: nothing guards it
    why: str = ""

    def line(self) -> str:
        spent = "-" if self.spent_usd is None else f"${self.spent_usd:,.2f}"
        if self.heartbeat_age_s is None:
            beat = "no heartbeat"
        else:
            beat = f"heartbeat {self.heartbeat_age_s:.0f} s ago" + (" SILENT" if self.silent else "")
        text = f"{self.stack:<14} {self.state:<14} {self.nodes:>3} nodes  ${self.usd_per_hour:,.2f}/h  "
        return text + f"spent {spent}  {beat}" + (f"  ({self.why})" if self.why else "")


def stack_names(repo: Path = REPO) -> list[str]:
    return files.stack_names(repo / "stacks")  # the one reader of stacks/ (stackconfig/files.py)


def status_of(
    stack: str,
    workspace: Path | str | None,
    read: Callable[[Path, str], tuple[dict[str, Any], dict[str, Any]]] = read_stack,
    s3_of: Callable[[Any], Any] | None = None,
    now: Callable[[], float] = time.time,
) -> StackStatus:
    """One stack's line; every failure is its `why`."""
    if isinstance(workspace, str):  # why its workspace was not found (the local RunPod not running...)
        return StackStatus(stack, "not up here", why=workspace)
    if workspace is None or not workspace.is_dir():
        return StackStatus(stack, "not up here")
    try:
        outputs, raw = read(workspace, stack)
        config = stack_config(raw)
    except Exception as exc:
        return StackStatus(stack, "unreadable", why=f"{type(exc).__name__}: {str(exc)[:160]}")
    nodes = len(outputs.get("nodes") or [])
    rate = float(outputs.get("cost_per_hour") or 0.0) if nodes else 0.0
    base = StackStatus(stack, "up" if nodes else "down", nodes, rate)
    if config.bucket is None:
        return replace_status(base, silent=bool(nodes), why="no bucket: its supervisor keeps no heartbeat")
    try:
        if s3_of is None:
            s3_of = store.make_s3
        beat = store.read_heartbeat(s3_of(config), config.bucket.name, stack, now())
    except Exception as exc:
        return replace_status(base, why=f"heartbeat not read ({type(exc).__name__})")
    if beat is None:
        return replace_status(base, silent=bool(nodes))
    data, age = beat
    interval = float(data.get("interval_s") or config.supervisor.interval_min * 60)
    state = str(data.get("state") or data.get("decision") or base.state)
    if not nodes and "release" in (data.get("done") or []):
        state = "released"
    spent = data.get("spent_usd")
    return replace_status(
        base,
        state=state if nodes or state == "released" else "down",
        spent_usd=float(spent) if isinstance(spent, int | float) else None,
        heartbeat_age_s=age,
        silent=bool(nodes) and age > SILENT_ROUNDS * interval,
    )


def replace_status(s: StackStatus, **changes: Any) -> StackStatus:
    return StackStatus(**{**asdict(s), **changes})


def main(
    argv: Sequence[str] | None = None,
    workspace_of: Callable[[str], Path | str | None] = lambda _s: None,
    names: Callable[[], list[str]] = stack_names,
) -> int:
    p = argparse.ArgumentParser(
        prog="scripts/status",
        description="Every stack of the project: its state as its supervisor last saw it, nodes, $/h, spent "
        "and the supervisor's heartbeat age (SILENT past two rounds).",
        epilog="Exit 0; 1 when a stack with compute up has a silent supervisor or none (nothing guards it).",
    )
    p.add_argument("--json", action="store_true", help="one JSON list, a record per stack")
    args = p.parse_args(argv)
    rows = [status_of(stack, workspace_of(stack)) for stack in names()]
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    else:
        for row in rows:
            print(row.line())
    return EXIT_UNGUARDED if any(r.silent for r in rows) else 0


def command(argv: Sequence[str]) -> int:
    """`trainstack status`: every stack, each found in its workspace as watch finds one (never started)."""
    import contextlib
    import io

    from ops import cli

    if cli.wants_help(argv):
        return main(["--help"])

    def workspace_of(stack: str) -> Path | str:
        said = io.StringIO()  # its "not up here" line goes into the stack's row, not above the listing
        with contextlib.redirect_stderr(said):
            found = cli.found_workspace("scripts/status", stack, None, required=False)
        return found if isinstance(found, Path) else said.getvalue().strip().split(": ", 1)[-1]

    return main(argv, workspace_of=workspace_of)


if __name__ == "__main__":
    sys.exit(main())
