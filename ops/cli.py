"""trainstack's one command line: `trainstack COMMAND ...` = `scripts/COMMAND ...` (docs/CLI.md).

The workflow commands (`up`, `down`, `recover`, `local-runpod`) parse their arguments here and run as calls
(ops/workflow.py, localcloud/servers.py). A command whose package has its own parser (`forecast`, `reconcile`,
and those an entry point above this layer adds: scripts/cli.py) gets its arguments as they are, after the
steps every command shares: the stack name checked, the Pulumi environment (common/pulumi.py), the target and
the workspace decided (ops/workspace.py), the local RunPod's address found or started. Every `--help` is its
parser's. Exit codes: the table in docs/CLI.md (0 done, 1 failed, 2 bad use or refused before anything
changed, 3 busy or not up here).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common import pulumi
from common.imports import collector_paused
from common.stackname import stack_name_problem
from localcloud.servers import LocalRunPodError, Servers
from ops import completion, workflow
from ops.workflow import BAD_USE, BUSY, FAILED, OK, Stop, say
from ops.workspace import workspace_for
from stackconfig import files

PROG = "trainstack"
HELP_WIDTH = 110  # the width of every --help without a terminal (pyproject's line length)
Main = Callable[[Sequence[str]], int]


@dataclass(frozen=True)
class Passthrough:
    """A command whose own parser reads its arguments (its `--help` is that parser's)."""

    name: str
    help: str
    run: Main


def lazy(module: str, function: str) -> Callable[[Sequence[str]], int]:
    """`module.function` as a command, imported only when the command runs (issue #47: the light commands,
    `scripts/local-runpod env`, watch and supervise, run many times a session and load nothing else's)."""

    def run(argv: Sequence[str]) -> int:
        with collector_paused():  # common/imports.py
            command = getattr(importlib.import_module(module), function)
        return int(command(argv))

    return run


def wants_help(argv: Sequence[str]) -> bool:
    return any(arg in ("-h", "--help") for arg in argv)


def stack_workspace(prog: str, stack: str, *, start: bool, required: bool = True) -> Path:
    """The environment for a command about a live stack, and its workspace: the Pulumi settings, then for the
    local RunPod its address (started when `start`, else read from the running one: Stop(3) when it is not
    running and `required`) and `.state/local/<stack>`; for the real RunPod the repo itself. A stack with no
    file in stacks/ is Stop(2) with the closest one (`watch devv` never advises `scripts/up devv`)."""
    workflow.checked_stack(prog, stack)
    target = workflow.decided_target(prog)  # before any read: Stop(2) on a shell that names both
    os.environ.update(pulumi.environment())
    if target.local:
        workflow.local_runpod_env(prog, stack, start=start)
    return workspace_for(stack, target.local, os.environ)


def found_workspace(prog: str, stack: str, given: Path | None, *, required: bool = True) -> Path | int:
    """`given`, else the workspace the one command line would have found for a bare `python -m watch STACK`
    (`stack_workspace`); the exit code it stopped with when it cannot be found."""
    if given is not None:
        return given
    try:
        return stack_workspace(prog, stack, start=False, required=required)
    except Stop as stop:
        return stop.code


def stack_command(prog: str, main: Main, *, required: bool = True) -> Main:
    """`main STACK --cwd WORKSPACE ARGS...` after `stack_workspace` (watch, supervise)."""

    def run(argv: Sequence[str]) -> int:
        if wants_help(argv) or not argv or argv[0].startswith("-"):
            return main(argv)  # its parser answers --help, or says the stack is missing
        workspace = stack_workspace(prog, argv[0], start=False, required=required)
        os.chdir(pulumi.REPO)
        return main([argv[0], "--cwd", str(workspace), *argv[1:]])

    return run


def _pulumi(argv: Sequence[str]) -> int:
    """The Pulumi CLI scripts/bootstrap built, offline, in the stack's workspace (ops/pulumi_wrapper.py)."""
    from ops import pulumi_wrapper

    if wants_help(argv[:1]) and len(argv) == 1:
        print(f"usage: scripts/pulumi PULUMI-ARGUMENTS...\n\n{pulumi_wrapper.HELP}")
        return OK
    names = _named_stacks(argv)  # any spelling Pulumi reads (-sX, -s=X, ...), checked before any path
    bad = [p for name in names if (p := stack_name_problem(name))]
    for problem in bad:
        say("scripts/pulumi", problem)
    if bad:
        return BAD_USE
    target = workflow.decided_target(
        "scripts/pulumi"
    )  # its engine reaches RunPod with this shell's variables
    try:
        plan = pulumi_wrapper.plan(argv, names, target.local, os.environ)
    except pulumi_wrapper.WrapperError as exc:
        say("scripts/pulumi", str(exc))
        return BAD_USE
    workflow.bootstrap("scripts/pulumi", "--no-test-tools")
    os.environ.update(pulumi.environment())
    pulumi_wrapper.prepare(plan, "scripts/pulumi")
    os.chdir(plan.workspace)
    pulumi.replace_process(plan.argv, pulumi.environment())


# The stack subcommands whose first positional argument is a stack name (`stack rename NEW`: the new one).
_POSITIONAL_STACK = ("select", "init", "rm", "rename")
# Pulumi's flags (besides --stack/-s) that take a value, so the next word is not a positional argument;
# and its one-letter ones that take the rest of their word (-C dir, -m message, -c config, -t target, -p N).
_VALUE_FLAGS = ("--secrets-provider", "--copy-config-from", "--cwd", "--message", "--config", "--target")
_VALUE_LETTERS = "Cmctp"


def _named_stacks(argv: Sequence[str]) -> list[str]:
    """The stacks a Pulumi command line names, parsed as Pulumi's flag parser (pflag) reads them:
    `--stack NAME`, `--stack=NAME`, `-s NAME`, `-sNAME`, `-s=NAME`, `-s` last in a cluster of one-letter
    flags (`-ys NAME`), and `stack select|init|rm|rename NAME`."""
    names: list[str] = []
    positional = len(argv) > 1 and argv[0] == "stack" and argv[1] in _POSITIONAL_STACK
    args = list(argv[2 if positional else 0 :])
    i = 0
    while i < len(args):
        arg, following = args[i], args[i + 1] if i + 1 < len(args) else None
        i += 1
        if arg == "--":  # the rest are arguments, never flags
            names += args[i : i + 1] if positional else []
            break
        if arg.startswith("--"):
            flag, eq, value = arg.partition("=")
            if flag == "--stack":
                names += [value] if eq else [following] if following is not None else []
                i += 0 if eq else 1
            elif flag in _VALUE_FLAGS and not eq:
                i += 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            for at, letter in enumerate(arg[1:], start=2):
                rest = arg[at:]
                if letter == "s":  # the stack: the rest of the word (after an optional '='), or the next
                    value = rest.removeprefix("=")
                    names += [value] if value else [following] if following is not None else []
                    i += 0 if value else 1
                    break
                if letter in _VALUE_LETTERS:  # another flag's value: the rest of the word, or the next
                    i += 0 if rest else 1
                    break
            continue
        if positional:
            names.append(arg)
            positional = False
    return names


def _forecast(argv: Sequence[str]) -> int:
    from forecast.cli import main

    return main(argv)


def on_account(prog: str, main: Main) -> Main:
    """`main` about the whole RunPod account (reconcile, team-budget), after the target is decided: on the
    local RunPod its address is read from the running one, as `scripts/watch` finds it (they refused the
    demo without `eval "$(scripts/local-runpod env)"`); Stop(3) when it is not running."""

    def run(argv: Sequence[str]) -> int:
        if wants_help(argv):
            return main(argv)
        target = workflow.decided_target(prog)  # the account and the states: one decision
        os.environ.update(pulumi.environment())
        if target.local and not os.environ.get("RUNPOD_API_URL"):
            servers = Servers.from_env(os.environ)
            if not servers.running():
                say(prog, "the local RunPod is not running, so it has no account to read; scripts/up STACK "
                    "(or scripts/local-runpod start) starts it")  # fmt: skip
                return BUSY
            os.environ.update(servers.env())
        return main(argv)

    return run


def _reconcile(argv: Sequence[str]) -> int:
    from ops.reconcile import main

    return on_account("scripts/reconcile", main)(argv)


CORE = (
    Passthrough("pulumi", "the Pulumi CLI scripts/bootstrap built, offline, from the repo", _pulumi),
    Passthrough(
        "forecast", "a stack's memory per GPU, hours, restarts and run cost, from its file", _forecast
    ),
    Passthrough("reconcile", "what the RunPod account bills that no stack's state holds", _reconcile),
)


def version() -> str:
    """The project's version (pyproject.toml, as the installed distribution records it), and the commit of
    a checkout when git can say it."""
    from importlib import metadata

    try:
        found = metadata.version(PROG)
    except metadata.PackageNotFoundError:
        found = "unknown"
    import subprocess

    try:
        commit = subprocess.run(
            ["git", "-C", str(pulumi.REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return f"{found} ({commit})" if commit else found


class _Version(argparse.Action):
    """`--version`: the version worked out only when asked (a git call), then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help")))

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{PROG} {version()}")
        parser.exit()


def parser(passthrough: Sequence[Passthrough]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--version", action=_Version, help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, summary: str, text: str) -> argparse.ArgumentParser:
        # Each usage names the command as the README does (scripts/up), like the other packages' parsers.
        return sub.add_parser(
            name, help=summary, description=text, prog=f"scripts/{name}", allow_abbrev=False,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip

    up = command("up", "bring a stack up (dev on the local RunPod by default)", UP_HELP)
    up_stack = up.add_argument(
        "stack", nargs="?", default="dev", metavar="STACK", help="a stack of stacks/ (default: dev)"
    )
    up.add_argument("-y", "--yes", action="store_true", help="apply without asking (the real RunPod)")
    up.set_defaults(run=lambda a, extra: workflow.up(a.stack, a.yes, extra), extra_ok=True)

    down = command("down", "take a stack down; stop the local RunPod once it is empty", DOWN_HELP)
    down_stack = down.add_argument(
        "stack", nargs="?", default="dev", metavar="STACK", help="a stack of stacks/ (default: dev)"
    )
    down.set_defaults(run=lambda a, extra: workflow.down(a.stack, extra), extra_ok=True)

    rec = command("recover", "recover a stack after an interrupted up", RECOVER_HELP)
    rec_stack = rec.add_argument("stack", metavar="STACK")
    rec.add_argument("--yes", action="store_true", help="remove a lock it cannot check; keep the orphans")
    rec.add_argument("--delete-orphans", action="store_true", help="delete the orphans without asking")
    rec.add_argument("--cwd", type=Path, metavar="DIR", help="the workspace (default: the one up uses)")
    rec.set_defaults(
        run=lambda a, _: workflow.recover(a.stack, a.yes, a.delete_orphans, a.cwd), extra_ok=False
    )

    local = command("local-runpod", "start, stop or show the local RunPod and moto S3", LOCAL_HELP)
    local.add_argument("verb", choices=("start", "stop", "status", "env"))
    local.set_defaults(run=lambda a, _: local_runpod(a.verb), extra_ok=False)

    for other in (*CORE, *passthrough):
        placeholder = sub.add_parser(other.name, help=other.help, add_help=False)
        if other.name in completion.STACK_FIRST:  # its own parser reads it; here for completion only
            completion.stack_names(placeholder.add_argument("stack", nargs="?", metavar="STACK"))
    for action in (up_stack, down_stack, rec_stack):
        completion.stack_names(action)
    shell = command("completion", "print the shell code that completes trainstack", completion.HELP)
    shell.add_argument("shell", choices=completion.SHELLS)
    shell.set_defaults(run=lambda a, _: completion.shellcode(a.shell), extra_ok=False)
    return p


def local_runpod(verb: str) -> int:
    servers = Servers.from_env(os.environ)
    if verb == "start":
        try:
            exported = servers.start(os.environ)
        except LocalRunPodError as exc:
            print(exc, file=sys.stderr)
            return FAILED
    elif verb == "stop":
        servers.stop()
        return OK
    elif verb == "status":
        print("\n".join(servers.status()))
        return OK if servers.running() else BUSY
    else:
        if not servers.running():
            say("local-runpod", "not running; run 'scripts/local-runpod start'")
            return FAILED
        exported = servers.env()
    print("".join(f"export {key}={value}\n" for key, value in exported.items()), end="")
    return OK


def main(argv: Sequence[str] | None = None, passthrough: Sequence[Passthrough] = ()) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # pydantic scans every installed package's entry points for plugins on its first model (~30 ms in each
    # Python process a command starts); trainstack uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if wants_help(args) and "COLUMNS" not in os.environ and not sys.stdout.isatty():
        # One help width for every command: the texts written by hand are 110 columns wide (the project's
        # line length), so argparse wraps its own at 110 too, not at the 80 it assumes without a terminal.
        os.environ["COLUMNS"] = str(HELP_WIDTH + 2)
    by_name = {c.name: c for c in (*CORE, *passthrough)}
    completion.answer(lambda: parser(passthrough))  # a shell asking: answered from the parsers, then exit
    try:
        if args and args[0] in by_name:
            return by_name[args[0]].run(args[1:])
        parsed, extra = parser(passthrough).parse_known_args(args)
        if extra and not parsed.extra_ok:
            parser(passthrough).error(f"unrecognized arguments: {' '.join(extra)}")
        code: int = parsed.run(parsed, extra)
        return code
    except Stop as stop:
        return stop.code
    except pulumi.PulumiError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return FAILED
    except files.UnknownStackError as exc:  # a step given a stack with no file: bad input, nothing changed
        print(f"{PROG}: {exc}", file=sys.stderr)
        return BAD_USE
    except KeyboardInterrupt:
        return 130


UP_HELP = """\
Set up everything and bring up a stack; extra arguments go to `pulumi up`.

The target comes from RUNPOD_API_URL (ops/workspace.py): a loopback URL, or no URL and no RUNPOD_API_KEY,
means the local RunPod and a moto S3 server (started here, left running: `down` stops them once nothing is
left), from a local workspace under .state/local/ so that tracked stack files never receive local salts or
demo secrets. Any other URL, or a key with no URL, means the real RunPod and S3, from the repo itself. Either
way the policy config file is checked first and the policy pack checks the plan before anything is created:
the extra arguments are read as Pulumi's CLI reads them, and any spelling of --skip-preview/-f (-rf,
--skip-preview=1), another --policy-pack or --policy-pack-config, --stack, --cwd, --config(-file) or a
template is refused (exit 2). One up per stack at a time on this machine: a second is refused
(exit 3) without touching the first. Against the real RunPod it prints the stack's $/h and run cost, then
Pulumi shows the plan and asks; --yes applies without asking (the only way without a terminal: exit 2
otherwise). Against the local RunPod it never asks. It ends with the stack's cost and the next command."""

DOWN_HELP = """\
Take a stack down (the way back from up, with the same target); extra arguments go to `pulumi destroy`.

On the local RunPod it destroys the stack from its local workspace, then stops the local RunPod and moto once
no stack holds anything there; the local copy is unprotected first and its checkpoint bucket (moto's, the
demo's checkpoints) is deleted with it. On the real RunPod Pulumi asks before deleting unless you pass --yes,
and refuses a protected stack (trainstack:protect). Either way it then deletes the live resources the stack
made that its state lacks (ops/orphans.py; look-alikes and volumes are listed, never deleted). Refused
(exit 3) while an up of the stack runs here."""

RECOVER_HELP = """\
Recover a stack after an interrupted `pulumi up` (a killed process, a dead machine); then run up again.

First the stack's update lock: left by a process of this machine that is gone, it is removed without asking;
one that still runs is refused (exit 3); one it cannot check (another machine's, a shared backend's) is
removed only after asking, or with --yes. Then: a torn `.attrs` sidecar of the file backend is removed, the
update lock cancelled, pending deletes of buckets whose S3 endpoint is gone forgotten, `pulumi refresh
--clear-pending-creates` run, and the live RunPod resources the stack made that its state lacks listed with
their $/h (ops/orphans.py): it offers to delete them (--yes keeps them; --delete-orphans deletes them)."""

LOCAL_HELP = """\
Start/stop the local RunPod (emulator) and a moto S3 server on loopback; `start` and `env` print the
environment to use them: eval "$(scripts/local-runpod start)". `status` exits 3 unless both run; `env` exits
1 when they do not. localcloud/servers.py says where their state lives and which variables shape them."""


if __name__ == "__main__":
    sys.exit(main())
