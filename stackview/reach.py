"""`scripts/logs` and `scripts/ssh`: into any node of a live stack in one command, on the local RunPod and
RunPod alike.

Both read the node from the stack's `nodes` output (common/outputs.py) and reach it as delivery does: ssh in
batch mode as root, the stack's own known_hosts with host keys kept under the pod id, the key in
`$TRAINSTACK_SSH_KEY` (the local RunPod's own key when `scripts/local-runpod env` set it), else ssh's own.

  scripts/logs dev                    # node 0's start-script log, last 100 lines (torchrun, training)
  scripts/logs prod --rank 3 -f       # follow node 3's log (Ctrl-C to leave)
  scripts/logs prod --rank 1 --progress  # node 1's training progress (one JSON line per logged step)
  scripts/ssh prod --rank 7           # a shell on node 7
  scripts/ssh prod --rank 2 -- nvidia-smi   # one command on node 2; its exit status is this one's

Exit status: the remote command's (ssh's 255: the node could not be reached), 2 bad use (no such rank),
3 the stack is not up here.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.outputs import NodeOutput
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget
from stackview import sources

EXIT_USAGE = 2
EXIT_NOT_UP = 3
EXIT_UNREACHABLE = 255  # ssh's own status when it never connected
DEFAULT_LINES = 100


EXAMPLES = "examples:\n" + (__doc__ or "").split("\n\n")[2]
LOGS_HELP = (
    "A node's start-script log (torchrun and the training job write there) or its training progress,\n"
    "tailed or followed, over SSH; RunPod's container log where SSH cannot reach the node."
)
SSH_HELP = "A shell, or one command, on a node of a live stack, with the stack's key and known_hosts."


class NoSuchNode(sources.WatchError):
    """The rank or pod asked for is not among the stack's nodes."""


def pick_node(stack: str, nodes: Sequence[NodeOutput], rank: int | None, pod: str | None) -> NodeOutput:
    """The node of `rank` (default 0) or of pod id `pod`; NoSuchNode naming the ones there are."""
    for node in nodes:
        if (pod is not None and node.pod_id == pod) or (pod is None and node.rank == (rank or 0)):
            return node
    have = ", ".join(f"{n.rank} ({n.pod_id})" for n in nodes) or "none"
    asked = f"pod {pod}" if pod is not None else f"rank {rank or 0}"
    raise NoSuchNode(f"stack '{stack}' has no node with {asked}; its nodes (rank and pod): {have}")


def log_path(outputs: Mapping[str, Any], node: NodeOutput, progress: bool) -> str:
    """The node's log as a shell word: the start script's own
    (`<workdir>/logs/start-node-<rank>.<pod id>.log`, where torchrun and the training job write too), or its
    training progress lines
    (`<workdir>/metrics/progress-node-<pod index>.<pod id>.jsonl`, train/node/progress.py; a glob, since a
    pool pod's index is its job's)."""
    workdir = sources.workdir_of(outputs)
    if progress:
        return f"{shlex.quote(workdir + '/metrics/progress-node-')}*.{shlex.quote(node.pod_id)}.jsonl"
    return shlex.quote(f"{workdir}/logs/start-node-{node.rank}.{node.pod_id}.log")


def log_command(path: str, lines: int, follow: bool) -> str:
    """The remote command: tail the log (followed: `tail -F`, which waits for a log not written yet); a log
    that is not there is one line on stderr and status 1."""
    if follow:
        return f"exec tail -n {lines} -F {path}"
    return (
        f'set -- {path}; if [ -e "$1" ]; then exec tail -n {lines} "$1"; fi; '
        'echo "no log at $1 yet: the start script has not written it (delivery off, or not started)" >&2; '
        "exit 1"
    )


def ssh_argv(target: SshTarget, command: str | None, tty: bool) -> list[str]:
    """ssh's argv for a shell (`command` None) or one command on the target, with delivery's options."""
    argv = ["ssh", *target.options(connect_timeout_s=10.0)]
    if tty:
        argv.append("-t")
    argv += ["-p", str(target.port), f"{target.user}@{target.host}"]
    return argv if command is None else [*argv, "--", command]


Exec = Callable[[Sequence[str]], int]


def _exec(argv: Sequence[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    # The process becomes ssh: its terminal, its signals, its exit status.
    os.execvp(argv[0], list(argv))  # noqa: S606 (an argv, no shell)


def _parser(prog: str, what: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=what, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )  # fmt: skip
    p.add_argument("stack", metavar="STACK", help="a stack that is up (stacks/Pulumi.STACK.yaml)")
    node = p.add_mutually_exclusive_group()
    node.add_argument("--rank", type=int, metavar="N", help="the node of rank N (default: 0)")
    node.add_argument("--pod", metavar="POD_ID", help="the node whose RunPod pod id is POD_ID")
    # Set by the one command line (ops/cli.py stack_command) from the target; not for people to type.
    p.add_argument("--cwd", type=Path, default=None, help=argparse.SUPPRESS)
    return p


def _node(args: argparse.Namespace, prog: str) -> tuple[dict[str, Any], NodeOutput] | int:
    if args.cwd is None:
        print(
            f"{prog}: run it as {prog} STACK (the one command line finds the stack's workspace)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        outputs = sources.stack_outputs(args.cwd, args.stack)
        return outputs, pick_node(args.stack, sources.stack_nodes(args.stack, outputs), args.rank, args.pod)
    except sources.NotUpError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_NOT_UP
    except sources.WatchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def logs(argv: Sequence[str] | None = None, run: Exec = _exec) -> int:
    p = _parser("scripts/logs", LOGS_HELP)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C to leave)")
    p.add_argument(
        "-n",
        "--lines",
        type=int,
        default=DEFAULT_LINES,
        metavar="N",
        help=f"last N lines (default {DEFAULT_LINES})",
    )
    p.add_argument(
        "--progress", action="store_true", help="the training progress lines (JSON, one per logged step)"
    )
    args = p.parse_args(argv)
    if args.lines < 0:
        p.error(f"--lines {args.lines}: give 0 or more lines")
    found = _node(args, p.prog)
    if isinstance(found, int):
        return found
    outputs, node = found
    target = sources.node_target(args.stack, node)
    command = log_command(log_path(outputs, node, args.progress), args.lines, args.follow)
    if args.follow:
        return run(ssh_argv(target, command, tty=False))
    try:
        text = Ssh(target, deadline_s=15.0, step_timeout_s=60.0).run(command)
    except DeliveryError as exc:
        return _container_log(p.prog, node, args.lines, exc)
    sys.stdout.write(text)
    return 0


def _container_log(prog: str, node: NodeOutput, lines: int, why: DeliveryError) -> int:
    """RunPod's container log of a node SSH did not reach (or whose log is not there), said as such."""
    print(f"{prog}: node {node.rank} ({node.pod_id}): {why}", file=sys.stderr)
    try:
        tail = sources.pod_logs([node.pod_id], lines).get(node.pod_id, [])
    except Exception as exc:  # a view: RunPod not answering is one line, not a traceback
        print(f"{prog}: RunPod's container log could not be read either: {exc}", file=sys.stderr)
        return 1
    print(
        f"{prog}: RunPod's container log of pod {node.pod_id} instead ({len(tail)} lines):", file=sys.stderr
    )
    sys.stdout.write("".join(f"{line}\n" for line in tail))
    return 1


def ssh(argv: Sequence[str] | None = None, run: Exec = _exec) -> int:
    p = _parser("scripts/ssh", SSH_HELP)
    p.add_argument("command", nargs="*", metavar="COMMAND", help="run this instead of a shell (after --)")
    given = list(sys.argv[1:] if argv is None else argv)
    cut = given.index("--") if "--" in given else len(given)
    args = p.parse_intermixed_args(given[:cut])
    words = [*args.command, *given[cut + 1 :]]
    found = _node(args, p.prog)
    if isinstance(found, int):
        return found
    _outputs, node = found
    target = sources.node_target(args.stack, node)
    command = " ".join(words) if words else None
    return run(ssh_argv(target, command, tty=command is None and sys.stdin.isatty()))
