"""`scripts/pulumi ARGS...`: the Pulumi CLI scripts/bootstrap built, run from the stack's own workspace, never
writing a tracked file, with the stack's policy pack in every preview and update it runs (issue #68).

The workspace is the one rule of ops/workspace.py. Against the local RunPod (no RUNPOD_API_KEY, or a loopback
RUNPOD_API_URL) that is `.state/local/<stack>`, the copy `scripts/up` runs from: Pulumi's salt, the demo's
placeholder secrets and the local S3 endpoint land there, never in `stacks/Pulumi.<stack>.yaml`. A command
that runs the program there (`preview`, `up`, `refresh`, `destroy`) first gets what `scripts/up` gives it:
the local RunPod and moto started, the stack created, the demo's secrets and spend limit (ops/local_demo.py).
Against the real RunPod the repo itself is the workspace and a `config set` writes the stack file on purpose
(the team commits its salt and encrypted secrets); a preview there of a stack file with no salt yet is
refused, since Pulumi would write one into it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.stackname import stack_name_problem
from stackconfig import files

REPO = Path(__file__).resolve().parents[1]
# Commands that run the program (and so the policy pack on a preview) and need the stack's secrets.
RUNS_PROGRAM = ("preview", "up", "update", "refresh", "destroy")
# Commands that take the policy pack: what `scripts/up` and `scripts/preview-report` run with it.
CHECKED = ("preview", "up", "update")
# Commands about no stack in particular: run from the repo as they are.
STACKLESS = ("about", "version", "help", "plugin", "login", "logout", "whoami", "new", "gen-completion")
# A stack file that holds these lines has its secrets provider; Pulumi writes a salt into one without.
_PROVIDER = ("encryptionsalt:", "secretsprovider:", "encryptedkey:")

HELP = (
    "Runs the Pulumi CLI that scripts/bootstrap builds, with the offline settings of scripts/env.sh, in the\n"
    "stack's own workspace, so it works in a fresh shell and never writes a tracked file:\n"
    "  scripts/pulumi preview --stack dev     # the local RunPod: from .state/local/dev, policy pack on\n"
    "  scripts/pulumi stack output --stack dev --json\n"
    "  scripts/pulumi config set --secret --stack prod trainstack:secrets.HF_TOKEN <value>   # real RunPod\n"
    "The target is scripts/up's (RUNPOD_API_URL / RUNPOD_API_KEY, ops/workspace.py). Against the local\n"
    "RunPod the workspace is .state/local/STACK, a copy of stacks/Pulumi.STACK.yaml refreshed on each\n"
    "command (edit the stack file, not the copy); preview, up, refresh and destroy start the local RunPod\n"
    "and set the demo's placeholder secrets first, as scripts/up does. Against the real RunPod it is the\n"
    "repo. preview and up always run the stack's policy pack (policy/, policy/config/STACK.json).\n"
    "A stack it names is checked first (exit 2). `scripts/pulumi help` is Pulumi's own help."
)


class WrapperError(Exception):
    """Bad use of the wrapper: one line, exit 2, nothing run."""


@dataclass(frozen=True)
class Plan:
    """What the wrapper runs: `argv` (Pulumi's arguments) in `workspace`; `demo`: the local RunPod's
    preparation first (a program run against the local RunPod)."""

    argv: tuple[str, ...]
    workspace: Path
    stack: str | None
    local: bool
    demo: bool


def _verb(argv: Sequence[str]) -> str:
    return next((a for a in argv if not a.startswith("-")), "")


def has_provider(stack_file: Path) -> bool:
    return stack_file.is_file() and any(
        line.startswith(_PROVIDER) for line in stack_file.read_text().splitlines()
    )


def plan(
    argv: Sequence[str], names: Sequence[str], local: bool, env: Mapping[str, str], repo: Path = REPO
) -> Plan:
    """The workspace and arguments of one `scripts/pulumi ARGS` whose command line names the stacks `names`
    (ops/cli.py reads them as Pulumi does), pure but for reading the stack files; WrapperError naming the fix
    for bad use."""
    from ops.workspace import workspace_for

    for name in names:
        problem = stack_name_problem(name)
        if problem:
            raise WrapperError(problem)
    verb = _verb(argv)
    stackless = verb in STACKLESS or list(argv[:2]) == ["stack", "ls"] or not argv
    if stackless:
        return Plan(tuple(argv), repo, None, local, demo=False)
    if not names:
        raise WrapperError(
            f"name the stack (`scripts/pulumi {' '.join(argv[:2])} --stack dev`): the stack picks the "
            "workspace, and Pulumi's selected stack may be another checkout's"
        )
    stack = names[-1]
    known = files.stack_names(repo / "stacks")
    if stack not in known and list(argv[:2]) not in (["stack", "init"], ["stack", "rename"]):
        raise WrapperError(
            f"no stack '{stack}' (stacks/Pulumi.{stack}.yaml); choose one of: {' '.join(known)}"
        )
    args = list(argv)
    if verb in CHECKED and not any(a.startswith("--policy-pack") for a in args):
        args += [
            "--policy-pack",
            str(repo / "policy"),
            "--policy-pack-config",
            str(repo / f"policy/config/{stack}.json"),
        ]
    workspace = workspace_for(stack, local, env, repo)
    if not local and verb in RUNS_PROGRAM and not has_provider(files.stack_path(stack, repo / "stacks")):
        raise WrapperError(
            f"stacks/Pulumi.{stack}.yaml has no secrets provider yet, so Pulumi would write a salt into it; "
            f"set the stack's secrets first (scripts/pulumi config set --secret --stack {stack} "
            "trainstack:secrets.NAME <value>) and commit the file with them"
        )
    return Plan(tuple(args), workspace, stack, local, demo=local and verb in RUNS_PROGRAM)


def prepare(p: Plan, prog: str) -> None:
    """The local workspace refreshed from the tracked stack file and, for a program run, what scripts/up
    gives it: the local RunPod and moto, the stack created, the demo's secrets, spend limit and endpoint."""
    if not p.local or p.stack is None:
        return
    from common import pulumi
    from common.stack import Stack
    from ops import local_demo, workflow
    from ops.workspace import local_root
    from ops.workspace import prepare as refresh

    if p.demo:
        workflow.use_local_runpod(prog)
    refresh(p.stack, local_root(os.environ))
    if p.demo:
        Stack(p.stack, p.workspace, env=pulumi.environment()).select(create=True, check=True)
        for line in local_demo.apply(p.stack, p.workspace).lines():
            print(line, file=sys.stderr)
