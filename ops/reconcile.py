"""`scripts/reconcile`: everything the RunPod account bills, matched against every stack's state.

`ops/orphans.py` looks at one stack after a crash; this looks across the account, on a schedule. Every billed
resource (pods, Instant Clusters with their members, network volumes, secrets) whose id no stack's state
holds is **unowned**, and is reported with its $/h and age: one line each on stdout, one webhook message
(`ALERT_WEBHOOK_URL`) for the lot. `--delete` deletes an unowned resource only when all three hold:

1. it carries **this project's ownership mark** (`components/names.py`): a pod's env `TRAINSTACK_OWNER=
   <project>/<stack>`, the same mark on every member of a cluster. A network volume or a secret can carry
   nothing that proves it ours (ops/ownership.py): reported, never deleted. A name that only looks like ours
   is reported, never deleted;
2. its id is in **no** stack's state, every stack's state was read (one unreadable state and nothing is
   deleted: that state might hold it), the stack its mark names is in the backend, and that stack's state
   recorded its **owner id** (env `TRAINSTACK_OWNER_ID`, written at create: a create cut short leaves it in
   the state's pending creates). A mark alone is what a same-named stack of another backend writes too, or
   anyone copies: reported (issue #62);
3. it is **older than the grace period** (`--grace-hours`, 6; at least 1, a finite number: `nan`, `inf` or
   less than 1 is refused with exit 2): a create in flight is billed before its `pulumi up` records it.

    scripts/reconcile [--delete] [--grace-hours H] [--project NAME] [--cwd DIR]

Exit status, for cron: **0** nothing unowned is billed (or all of it was deleted), **1** unowned resources
remain (listed), **2** not checked (no RunPod key, a state unreadable); nothing was deleted then.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from common.pulumi import PulumiError
from common.stack import Stack
from components.names import owner_mark, secret_description, secret_name
from facts.money import HOURS_PER_MONTH, SNAPSHOT
from facts.pods import OWNER_ENV, OWNER_ID_ENV, PodStatus
from ops.orphans import DELETE_ORDER, recorded_owner_ids, shown
from ops.ownership import Kind

EXIT_CLEAN, EXIT_UNOWNED, EXIT_NOT_CHECKED = 0, 1, 2
DEFAULT_GRACE_H = 6.0
MIN_GRACE_H = 1.0  # a create in flight (a cluster waits for every member) is recorded well within it
REPO = Path(__file__).resolve().parents[1]
_STACK = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")  # Pulumi's stack-name characters
_SECRET_MARK = re.compile(r"^trainstack stack (?P<stack>[A-Za-z0-9_.-]{1,100}): (?P<env>[A-Z][A-Z0-9_]*)$")
Action = Literal["delete", "report"]


@dataclass(frozen=True)
class Billed:
    """One resource the account bills (or holds: a secret bills nothing but is still unowned)."""

    kind: Kind
    id: str
    name: str
    usd_per_hour: float
    mark: str | None  # as ops/ownership.Live: pod env, the members' common env, a secret's description
    created: float | None  # epoch seconds; None when RunPod does not say (network volumes)
    members: int = 0  # a cluster's member pods
    owner_id: str | None = None  # env OWNER_ID_ENV (a cluster's: its members', when they agree)


@dataclass(frozen=True)
class Finding:
    """An unowned resource, what --delete may do with it, and why."""

    resource: Billed
    age_s: float | None
    action: Action
    reason: str


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None  # an age we cannot read is unknown: never deleted for being old


def _pod(pod: Any) -> Billed:
    env = pod.env or {}
    cost, created = float(pod.cost or 0.0), _epoch(pod.created_at)
    return Billed("pod", pod.id, pod.name, cost, env.get(OWNER_ENV), created, owner_id=env.get(OWNER_ID_ENV))


def read_billed(client: Any) -> list[Billed]:
    """Every pod, cluster (its members' cost, mark and first creation), volume and secret of the account.

    Pods are listed with the cluster members (`includeClusterPods=true`): a member whose cluster RunPod no
    longer lists is billed all the same, and is reported as a pod of its own."""
    members: dict[str, list[Any]] = {}
    loose: list[Any] = []
    for pod in client.list_all_pods():
        if pod.status == PodStatus.TERMINATED:
            continue
        if pod.cluster is not None and pod.cluster.id:
            members.setdefault(pod.cluster.id, []).append(pod)
        else:
            loose.append(pod)
    out: list[Billed] = []
    for cluster in client.list_clusters():
        pods = members.pop(cluster.id, [])
        marks = {(p.env or {}).get(OWNER_ENV) for p in pods}
        owner_ids = {(p.env or {}).get(OWNER_ID_ENV) for p in pods}
        created = [t for t in (_epoch(p.created_at) for p in pods) if t is not None]
        cost = sum(float(p.cost or 0.0) for p in pods)
        mark = marks.pop() if len(marks) == 1 else None  # every member the same mark, or none
        owner_id = owner_ids.pop() if len(owner_ids) == 1 else None
        first = min(created, default=None)
        out.append(Billed("cluster", cluster.id, cluster.name, cost, mark, first, len(pods), owner_id))
    out += [_pod(p) for p in [*loose, *(p for stray in members.values() for p in stray)]]
    for volume in client.list_volumes():
        hourly = SNAPSHOT.volume_monthly(volume.size) / HOURS_PER_MONTH
        out.append(Billed("volume", volume.id, volume.name, hourly, None, None))
    secrets, why_not = client.secrets_if_listed()  # GraphQL retired: no secrets to list (one line why)
    if why_not:
        print(f"reconcile: {why_not}", file=sys.stderr)
    for secret in secrets:
        out.append(
            Billed("secret", secret.id, secret.name, 0.0, secret.description, _epoch(secret.created_at))
        )
    return out


def marked_stack(resource: Billed, project: str) -> str | None:
    """The stack this project's ownership mark on `resource` names, or None when it carries none."""
    if not resource.name.isascii() or not resource.name.isprintable():
        return None
    if resource.kind in ("pod", "cluster"):
        prefix = owner_mark(project, "")
        stack = (resource.mark or "").removeprefix(prefix) if (resource.mark or "").startswith(prefix) else ""
        return stack if _STACK.match(stack) and resource.mark == owner_mark(project, stack) else None
    if resource.kind == "secret":
        found = _SECRET_MARK.match(resource.mark or "")
        if found is None:
            return None
        stack, env = found["stack"], found["env"]
        ok = resource.name == secret_name(stack, env) and resource.mark == secret_description(stack, env)
        return stack if ok else None
    return None  # a network volume carries no mark (ops/ownership.py)


def grace_problem(hours: float) -> str | None:
    """None for a grace a round may use; else the one line naming the flag and the fix."""
    if math.isfinite(hours) and hours >= MIN_GRACE_H:
        return None
    return (
        f"--grace-hours {hours:g}: must be a finite number of hours, at least {MIN_GRACE_H:g} (a create in "
        f"flight bills before its `pulumi up` records it); pass e.g. --grace-hours {DEFAULT_GRACE_H:g}"
    )


def reconcile(
    billed: Iterable[Billed], states: Mapping[str, set[str]], project: str, now: float, grace_s: float
) -> list[Finding]:
    """The unowned resources, in deletion order, each with its action; pure. `states`: per stack, the
    resource ids and the owner ids its state holds (`pulumi_states`). A grace that is not a finite number of
    at least MIN_GRACE_H hours is a ValueError: nothing young may ever be called lost."""
    if grace_problem(grace_s / 3600) is not None or not math.isfinite(now):
        raise ValueError(f"reconcile: grace {grace_s!r} s or clock {now!r} is not one a round may use")
    owned = set().union(*states.values()) if states else set()
    found: list[Finding] = []
    for r in billed:
        if r.id in owned:
            continue
        age = None if r.created is None else max(0.0, now - r.created)
        stack = marked_stack(r, project)
        action: Action = "report"
        if stack is None:
            why = (
                "a network volume carries no ownership mark; delete it yourself if nobody needs its data"
                if r.kind == "volume"
                else "it carries no ownership mark of this project: not ours, never deleted"
            )
        elif stack not in states:
            why = f"marked {stack}'s, but this backend has no stack {stack} (wrong PULUMI_BACKEND_URL?): kept"
        elif r.kind == "secret":
            why = f"marked {stack}'s, but a secret's name and description can be copied: kept"
        elif not r.owner_id or r.owner_id not in states[stack]:
            why = (
                f"marked {stack}'s, but its TRAINSTACK_OWNER_ID is not one {stack}'s state recorded at "
                "create (a same-named stack of another backend, or a copied mark): kept"
            )
        elif age is None:
            why = f"marked {stack}'s, but RunPod gives no creation time, so its age is unknown: kept"
        elif age < grace_s:
            why = f"marked {stack}'s, in no state, but younger than the grace ({grace_s / 3600:g} h): kept"
        else:
            action, why = "delete", f"marked {stack}'s, in no stack's state, older than the grace"
        found.append(Finding(r, age, action, why))
    found.sort(key=lambda f: (DELETE_ORDER.index(f.resource.kind), f.resource.name, f.resource.id))
    return found


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "age ?"
    return f"{seconds / 86400:.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


def line(f: Finding) -> str:
    """One line per unowned resource: kind, name, id, $/h, age, the verdict."""
    r = f.resource
    extra = f" ({r.members} pods)" if r.kind == "cluster" else ""
    return (
        f"unowned {r.kind}{extra} {shown(r.name)} [{shown(r.id)}] ${r.usd_per_hour:,.2f}/h, {_age(f.age_s)}: "
        f"{f.reason}"
    )


def delete(client: Any, r: Billed) -> bool:
    """Delete one unowned resource; False (with a line) for a secret GraphQL no longer lets us delete."""
    verbs: dict[str, Callable[[str], object]] = {
        "cluster": client.delete_cluster,
        "pod": client.delete_pod,
        "secret": client.delete_secret,
    }
    from providers.runpod import errors  # loaded where a delete runs (the watch footer never deletes)

    try:
        verbs[r.kind](r.id)  # a volume never reaches here: marked_stack gives it no stack
    except errors.ApiError as exc:
        if r.kind != "secret" or not errors.graphql_unavailable(exc):
            raise
        print(f"reconcile: {errors.left_in_console(r.name, r.id, exc)}", file=sys.stderr)
        return False
    return True


def run(
    client: Any,
    states: Mapping[str, set[str]] | None,
    *,
    project: str,
    now: float,
    grace_s: float,
    remove: bool,
    say: Callable[[str], None] = print,
    notify: Callable[[str], object] | None = None,
) -> int:
    """One reconcile round. `states` None: some stack's state could not be read (then nothing is deleted)."""
    findings = reconcile(read_billed(client), states or {}, project, now, grace_s)
    for f in findings:
        say(line(f))
    if states is None:
        say("reconcile: not every stack's state could be read: nothing deleted")
        return EXIT_NOT_CHECKED
    left = list(findings)
    if remove:
        for f in findings:
            if f.action == "delete":
                r = f.resource
                if delete(client, r):
                    say(f"reconcile: deleted {r.kind} {shown(r.name)} [{shown(r.id)}]")
                    left.remove(f)
    if left and notify is not None:
        total = sum(f.resource.usd_per_hour for f in left)
        notify(f"[trainstack reconcile] {len(left)} billed RunPod resources no stack owns, ${total:,.2f}/h:\n"
               + "\n".join(line(f) for f in left))  # fmt: skip
    say(f"reconcile: {len(left)} unowned left, ${sum(f.resource.usd_per_hour for f in left):,.2f}/h")
    return EXIT_UNOWNED if left else EXIT_CLEAN


# -- the stacks' states, through the Pulumi CLI ------------------------------------------------------------


def pulumi_states(
    cwd: Path, say: Callable[[str], None], binary: str = "pulumi"
) -> dict[str, set[str]] | None:
    """Every stack of the project in the backend (not only those with a file here) -> the resource ids and
    the owner ids (ops/orphans.py `recorded_owner_ids`) its state holds: RunPod's ids and our random ones
    never collide."""
    try:
        stacks = Stack("", cwd, binary=binary).stacks()
        states = {}
        for stack in stacks:
            state = Stack(stack, cwd, binary=binary).export()
            states[stack] = state.ids | recorded_owner_ids(state.deployment)
    except (PulumiError, KeyError, TypeError) as exc:
        say(f"reconcile: a state is unreadable: {exc}")
        return None
    return states


def unowned(
    client: Any, cwd: Path, *, project: str, now: float, grace_s: float = DEFAULT_GRACE_H * 3600
) -> list[Finding]:
    """What a reconcile round would report, read only (`scripts/watch`'s footer): every billed resource no
    stack's state holds. Raises RuntimeError when some stack's state cannot be read, since then a resource
    might be that stack's and calling it unowned would be a guess."""
    problems: list[str] = []
    states = pulumi_states(cwd, problems.append)
    if states is None:
        raise RuntimeError(problems[-1] if problems else "reconcile: a state is unreadable")
    return reconcile(read_billed(client), states, project, now, grace_s)


def project_name(cwd: Path) -> str:
    """The Pulumi project's name, from `Pulumi.yaml`: the ownership mark's first half."""
    return str(yaml.safe_load((cwd / "Pulumi.yaml").read_text())["name"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/reconcile", description=__doc__.splitlines()[0])
    p.add_argument(
        "--delete", action="store_true", help="delete what carries our mark, is in no state, is old"
    )
    p.add_argument("--grace-hours", type=float, default=DEFAULT_GRACE_H)
    p.add_argument("--project", help="default: Pulumi.yaml's name")
    p.add_argument("--cwd", type=Path, default=REPO, help="the Pulumi project (its backend holds the states)")
    args = p.parse_args(argv)
    problem = grace_problem(args.grace_hours)
    if problem:
        print(f"scripts/reconcile: {problem}", file=sys.stderr)
        return EXIT_NOT_CHECKED  # 2: bad use, nothing read or deleted
    project = args.project or project_name(args.cwd)

    from providers.errors import TrainstackError
    from providers.runpod.client import RunPodClient
    from train.monitor.notify import Webhook
    from train.monitor.webhook_url import webhook_url_problem

    url = os.environ.get("ALERT_WEBHOOK_URL")
    bad_url = webhook_url_problem(url) if url else None  # never quotes the URL: it is the secret
    if bad_url:
        print(f"reconcile: not checked: ALERT_WEBHOOK_URL {bad_url}", file=sys.stderr)
        return EXIT_NOT_CHECKED
    notify = Webhook(url, log=print).send if url else None
    try:
        client = RunPodClient.from_env()
        with client:
            return run(
                client,
                pulumi_states(args.cwd, print),
                project=project,
                now=datetime.now().timestamp(),
                grace_s=args.grace_hours * 3600,
                remove=args.delete,
                notify=notify,
            )
    except TrainstackError as exc:
        print(f"reconcile: not checked: {exc}", file=sys.stderr)
        return EXIT_NOT_CHECKED


if __name__ == "__main__":
    raise SystemExit(main())
