"""`up`, `down` and `recover`: the operator's workflow as calls (ops/cli.py parses their arguments).

Each returns its exit code (docs/CLI.md's one table) and says what it did on stderr, one line a step, prefixed
`scripts/<command>:` (the README's commands; `trainstack <command>` is the same function).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from common import pulumi
from common.pulumi import REPO, PulumiError
from common.stack import Stack
from common.stackname import stack_name_problem
from localcloud.servers import LocalRunPodError, Servers
from ops import backend_repair, pending_deletes, stale_lock, upflags
from ops.stacklock import StackLocked, held
from ops.workspace import Target, TargetConflict, local_root, prepare, resolve_target, workspace_for
from stackconfig import files

OK, FAILED, BAD_USE, BUSY = 0, 1, 2, 3


class Stop(Exception):
    """Ends a command with `code`, after its message was said."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def say(prog: str, text: str) -> None:
    print(f"{prog}: {text}", file=sys.stderr, flush=True)


def checked_stack(prog: str, stack: str) -> None:
    """A valid name of a stack with a file in stacks/, or Stop(2) with the fix."""
    problem = stack_name_problem(stack)
    if problem:
        say(prog, problem)
        raise Stop(BAD_USE)
    names = files.stack_names(REPO / "stacks")
    if stack not in names:
        import difflib

        close = difflib.get_close_matches(stack, names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        say(prog, f"no stack '{stack}' (stacks/Pulumi.{stack}.yaml); {hint}choose one of: {' '.join(names)}")
        raise Stop(BAD_USE)


def decided_target(prog: str) -> Target:
    """This shell's target (ops/workspace.py's one rule), decided before anything is read: Stop(2) with the
    one line naming the variables and the fix when the shell names the local demo and the real RunPod."""
    try:
        return resolve_target(os.environ)
    except TargetConflict as exc:
        say(prog, f"refused: {exc}")
        raise Stop(BAD_USE) from None


def local_runpod_env(prog: str, stack: str, *, start: bool) -> None:
    """Point this process at the local RunPod when the shell names no loopback URL: started when `start`,
    else read from the running one, else Stop(3). Never left to the providers' default URL (the real
    RunPod's), which a real RUNPOD_API_KEY in the shell would then reach."""
    if start:
        use_local_runpod(prog)
        return
    if os.environ.get("RUNPOD_API_URL"):
        return  # a loopback URL (the target rule said local): the local RunPod already
    servers = Servers.from_env(os.environ)
    if not servers.running():
        say(prog, f"stack '{stack}' is not up here (the local RunPod is not running); run scripts/up {stack}")
        raise Stop(BUSY)
    os.environ.update(servers.env())


def bootstrap(prog: str, *extra: str) -> None:
    """scripts/bootstrap (it stays bash: it makes the Python this runs in), or Stop(1)."""
    if subprocess.run([str(REPO / "scripts" / "bootstrap"), "--quiet", *extra], check=False).returncode != 0:
        say(prog, "setting up failed (see above); nothing was created or rented. Fix that and run this again")
        raise Stop(FAILED)


def use_local_runpod(prog: str) -> None:
    """Start the local RunPod and moto (if they are not running) and point this process at them."""
    try:
        os.environ.update(Servers.from_env(os.environ).start(os.environ))
    except LocalRunPodError as exc:  # its message names the server and its log
        print(exc, file=sys.stderr)
        say(prog, "the local RunPod did not start; nothing was created")
        raise Stop(FAILED) from None


def up(stack: str, yes: bool, pulumi_args: Sequence[str]) -> int:
    prog = "scripts/up"
    checked_stack(prog, stack)
    refused = upflags.refusal(pulumi_args)  # read as Pulumi's CLI reads them (ops/upflags.py)
    if refused:
        say(prog, refused)
        return BAD_USE
    target = decided_target(prog)
    try:
        with held(stack, os.environ, write_pid=True):
            return _up(prog, stack, yes, pulumi_args, target)
    except StackLocked as exc:
        say(prog, f"another scripts/up of '{stack}' is running here (pid {exc.pid}); wait for it to finish, "
            "then run this again")  # fmt: skip
        return BUSY


def bootstrap_options(stack: str, local: bool, root: bool, stacks_dir: Path = files.STACKS_DIR) -> list[str]:
    """What `scripts/up STACK` asks of scripts/bootstrap. As root the local RunPod's pods are emulated hosts
    that train: their "image" is the torch venv of uv.lock's node group (--with-torch), and the hosts of a
    `cluster.scheduler: slurm` stack run Slurm, munge, MariaDB and slurmdbd (--with-slurm, Debian's
    packages). The test-only tools are left to scripts/test: a first up does not wait for them."""
    extra = ["--no-test-tools"]
    if local and root:
        extra.append("--with-torch")
        cluster = files.read_config(stack, stacks_dir).get("trainstack:cluster")
        if isinstance(cluster, dict) and cluster.get("scheduler") == "slurm":
            extra.append("--with-slurm")
    return extra


def _up(prog: str, stack: str, yes: bool, pulumi_args: Sequence[str], target: Target) -> int:
    # Imported here: the light commands (`scripts/local-runpod env`, watch, supervise) never load it (#47).
    from ops import local_account, local_demo, plan_cost

    local = target.local
    extra = bootstrap_options(stack, local, os.geteuid() == 0)
    if "--with-torch" in extra:
        say(prog, "the demo's nodes train: making sure their torch venv (uv.lock's node group) is installed")
    bootstrap(prog, *extra)
    os.environ.update(pulumi.environment())
    from policy import config_file
    from stackconfig.config import ConfigError

    policy_file = f"policy/config/{stack}.json"
    problems, notices = config_file.file_report(
        REPO / policy_file, os.environ.get(config_file.OVERRIDE_ENV) == "1"
    )
    for line in [*(f"warning: {n}" for n in notices), *problems]:
        print(f"{policy_file}: {line}", file=sys.stderr)
    if problems:
        return BAD_USE
    seen: Path | None = None
    if not local:
        say(
            prog,
            f"targeting the real RunPod ({target.runpod_url}) and S3",
        )
        try:
            say(prog, plan_cost.cost_line(stack))
        except ConfigError as exc:
            say(prog, f"stacks/Pulumi.{stack}.yaml: {exc}")
            return BAD_USE
        if yes:
            confirm = ["--yes"]
        elif sys.stdin.isatty():
            confirm = []  # Pulumi previews, shows the plan and asks (the cost is the line above)
        else:
            say(prog, "the real RunPod bills from the first resource and there is no terminal to ask on; "
                "pass --yes to apply without asking")  # fmt: skip
            return BAD_USE
        workspace = REPO
        Stack(stack, workspace).select(create=True, check=True)
    else:
        confirm = ["--yes"]  # nothing there is real
        use_local_runpod(prog)
        say(prog, f"targeting the local RunPod at {os.environ['RUNPOD_API_URL']} and moto S3 at "
            f"{os.environ['AWS_ENDPOINT_URL_S3']}")  # fmt: skip
        workspace = prepare(stack, local_root(os.environ))
        Stack(stack, workspace).select(create=True, check=True)
        for line in local_demo.apply(stack, workspace).lines():
            print(line, file=sys.stderr)
        # One account for every local stack: one line when the others still running leave too little room.
        if note := local_account.room(stack):
            say(prog, note)
            return FAILED
        # The local RunPod or moto restarted since this stack's last up: moto comes back empty and pods may
        # have changed, so read everything back first; the up then recreates what is gone.
        seen = workspace / ".local-boot"
        boot = os.environ.get("TRAINSTACK_LOCAL_BOOT", "")
        if seen.is_file() and seen.read_text().strip() != boot:
            say(prog, f"the local RunPod or moto restarted since the last up of '{stack}'; refreshing first")
            quiet = ("--suppress-outputs", "--suppress-progress")
            Stack(stack, workspace).refresh("--yes", "--skip-preview", *quiet, check=True, capture=False)
    # Quiet by default: no stack outputs (the cost is said below) and no progress dots.
    policy = [
        "--policy-pack",
        str(REPO / "policy"),
        "--policy-pack-config",
        str(REPO / f"policy/config/{stack}.json"),
    ]
    done = Stack(stack, workspace).up(
        *confirm,
        "--suppress-outputs",
        "--suppress-progress",
        *policy,
        *pulumi_args,
        shown=True,
        interactive=True,
    )
    if not done.ok:
        if done.locked:
            # This process holds the stack's lock here, so no scripts/up of it is running on this machine.
            say(prog, f"'{stack}' is locked by an update that is not a scripts/up running here (a killed up "
                f"leaves its lock); unless someone else is deploying it, run scripts/recover {stack}, then "
                f"scripts/up {stack}")  # fmt: skip
        if local and (note := local_account.room(stack)):  # another stack started in between: say so
            say(prog, note)
        return FAILED
    if seen is not None:
        seen.write_text(os.environ.get("TRAINSTACK_LOCAL_BOOT", "") + "\n")
    try:
        cost = plan_cost.outputs_line(Stack(stack, workspace).outputs())
    except (PulumiError, ValueError):
        cost = f"'{stack}' has no cost outputs (pulumi stack output --stack {stack})"
    say(prog, f"'{stack}' is up: {cost}; artifacts are in out/{stack}/")
    # With delivery on (the default) each node got its files over SSH and runs its start script.
    say(
        prog,
        f"next: scripts/watch {stack}    (its nodes, steps and money; scripts/down {stack} takes it down)",
    )
    return OK


def down(stack: str, pulumi_args: Sequence[str]) -> int:
    prog = "scripts/down"
    checked_stack(prog, stack)
    # Every write refused: the down could only fail part-way, with a line that said nothing (issue #62).
    if os.environ.get("TRAINSTACK_READ_ONLY") == "1":
        say(prog, "refused: TRAINSTACK_READ_ONLY=1 (a preview's setting) refuses every RunPod and S3 write, "
            "and a down deletes; run it from a shell without it (unset TRAINSTACK_READ_ONLY)")  # fmt: skip
        return BAD_USE
    target = decided_target(prog)
    try:  # scripts/up's lock for the stack: never destroy what an up of it is creating
        with held(stack, os.environ, write_pid=False):
            return _down(prog, stack, pulumi_args, target)
    except StackLocked as exc:
        say(prog, f"a scripts/up of '{stack}' is running here (pid {exc.pid}); let it finish first")
        return BUSY


def _down(prog: str, stack: str, pulumi_args: Sequence[str], target: Target) -> int:
    # Imported here: the light commands (`scripts/local-runpod env`, watch, supervise) never load it (#47).
    from ops import local_account, orphans

    bootstrap(prog, "--no-test-tools")
    os.environ.update(pulumi.environment())
    if not target.local:
        say(
            prog,
            f"destroying '{stack}' on the real RunPod ({target.runpod_url}) and S3",
        )
        if not Stack(stack, REPO).destroy(*pulumi_args, capture=False, interactive=True).ok:
            return FAILED
        report = orphans.check(stack, REPO, delete=True)  # asks, the orphans' $/h listed first
        return orphans.EXIT_CODES[report.outcome]
    workspace = prepare(stack, local_root(os.environ))
    if not Stack(stack, workspace).select():
        say(prog, f"'{stack}' was never brought up locally; nothing to take down")
    else:
        use_local_runpod(prog)  # the stack's pods live in the local RunPod: it must run for their deletion
        if not _unguard_local_copy(prog, stack, workspace):
            return FAILED
        if not Stack(stack, workspace).destroy("--yes", *pulumi_args, capture=False).ok:
            return FAILED
        report = orphans.check(stack, workspace, delete=True, yes=True)
        if report.outcome == "not checked":
            return orphans.EXIT_CODES[report.outcome]
        say(prog, f"'{stack}' is down")
    servers = Servers.from_env(os.environ)
    if not servers.running():
        return OK
    os.environ.update(servers.env())
    left = local_account.left()
    if left:
        say(prog, "the local RunPod keeps running; still there:")
        print("\n".join(left), file=sys.stderr)
        say(prog, "take those down with scripts/down STACK")
    else:
        servers.stop()
        say(prog, "nothing left on the local RunPod; stopped it and the S3 server")
    return OK


def _unguard_local_copy(prog: str, stack: str, workspace: Path) -> bool:
    """The demo's checkpoints live in moto, nothing real: record trainstack:bucket.force_destroy on the
    bucket (a targeted up) so the destroy may delete a bucket that holds them, then unprotect the local copy
    (after that up, which puts a protected stack's protect back). A real bucket is never forced here. False,
    after saying Pulumi's cause (a provider's, e.g. NoSuchBucket) and the way out, when that up failed."""
    # Imported here: the light commands (`scripts/local-runpod env`, watch, supervise) never load it (#47).
    from ops import local_demo

    client = Stack(stack, workspace)
    try:
        bucket = client.export().urn_of("s3:CheckpointBucket")
    except PulumiError:
        bucket = ""  # no state to read: nothing to force
    if bucket:
        local_demo.apply(stack, workspace)  # the program runs for that up: the demo's settings, unsaid
        client.set_config("trainstack:bucket.force_destroy", "true", path=True, kind="bool")
        try:
            client.up("--target", bucket, "--yes", "--skip-preview", check=True)
        except PulumiError as exc:  # its message ends with Pulumi's cause, not "Duration: 1s" (issue #62)
            say(prog, f"letting the destroy delete the demo's checkpoint bucket failed: {exc}")
            say(prog, f"nothing was destroyed; fix that, then run scripts/down {stack} again (a bucket the "
                f"local S3 lost: scripts/recover {stack} refreshes the state, which drops it)")  # fmt: skip
            return False
    client.unprotect_all()
    return True


def recover(stack: str, yes: bool, delete_orphans: bool, cwd: Path | None) -> int:
    prog = "scripts/recover"
    problem = stack_name_problem(stack)
    if problem:
        say(prog, problem)
        return BAD_USE
    target = decided_target(prog)
    os.environ.update(pulumi.environment())
    workspace = cwd if cwd is not None else workspace_for(stack, target.local, os.environ)
    if target.local and workspace.resolve() == REPO.resolve():
        say(prog, f"refused: --cwd {workspace} is the repo, the real RunPod's workspace; the local demo's "
            f"Pulumi would write its salt into the tracked stacks/Pulumi.{stack}.yaml: drop --cwd (the local "
            f"workspace is {workspace_for(stack, True, os.environ)})")  # fmt: skip
        return BAD_USE
    if not (workspace / "Pulumi.yaml").is_file():
        say(prog, f"no Pulumi project at {workspace}")
        return BAD_USE
    try:
        with held(stack, os.environ, write_pid=False):
            if target.local:  # its pods live in the local RunPod: never the providers' default (real) URL
                local_runpod_env(prog, stack, start=False)
            return _recover(prog, stack, yes, delete_orphans, workspace)
    except StackLocked as exc:
        say(prog, f"a scripts/up of '{stack}' is still running here (pid {exc.pid}); let it finish")
        return BUSY


def _recover(prog: str, stack: str, yes: bool, delete_orphans: bool, workspace: Path) -> int:
    # Imported here: the light commands (`scripts/local-runpod env`, watch, supervise) never load it (#47).
    from ops import orphans

    # Holding the per-stack lock proves no scripts/up of it runs here; the lock file says if a pulumi did.
    code, line = stale_lock.lock_state(os.environ.get("PULUMI_BACKEND_URL", ""), stack)
    say(prog, line)
    if code == stale_lock.LIVE:
        say(prog, "let that update finish (or stop it), then run this again")
        return BUSY
    if code != stale_lock.STALE and not yes:
        answer = input(
            f"Remove the update lock of '{stack}'? Only if no 'pulumi up' of it is still running. [y/N] "
        )
        if not answer.lower().startswith("y"):
            say(prog, "nothing changed")
            return FAILED
    # A torn `<stack>.json.attrs` sidecar of the file backend fails every command ("failed to load
    # checkpoint: EOF"): ops/backend_repair.py removes a sidecar that is not JSON, and nothing else.
    backend_repair.repair(log=lambda line: print(line, file=sys.stderr))
    Stack(stack, workspace).cancel()
    # A pending delete against an S3 endpoint that is gone fails every up: forget it.
    for line in pending_deletes.forget(stack, workspace):
        print(line, file=sys.stderr)
    # The owner ids the state recorded, pending creates included, before the refresh drops those: a create
    # cut short is provably the stack's only through them (ops/ownership.py).
    try:
        recorded = orphans.recorded_owner_ids(orphans.export_state(stack, workspace))
    except PulumiError:  # an unreadable state: the refresh below says why; nothing is provable from it
        recorded = set()
    if not Stack(stack, workspace).refresh("--yes", "--clear-pending-creates", capture=False).ok:
        return FAILED
    report = orphans.check(
        stack, workspace, delete=delete_orphans, yes=yes or delete_orphans, recorded=recorded
    )
    if report.outcome == "left":
        say(prog, f"'{stack}' state matches RunPod, except the orphans listed above; run "
            f"'scripts/up {stack}' "
            "to adopt them and converge")  # fmt: skip
        return OK
    if report.outcome == "not checked":
        say(prog, f"'{stack}' state refreshed; orphans were not checked (the line above says why)")
        return OK
    say(prog, f"'{stack}' state matches RunPod again; run 'scripts/up {stack}' to converge")
    return OK
