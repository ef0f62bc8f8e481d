"""Live RunPod resources of a stack that its state lacks: list them, or delete them.

A create cut short by a kill (or a `pulumi destroy` run before the next `up` could adopt it) leaves a
resource billing at RunPod that the state does not know: `pulumi destroy` cannot see it. Which live
resource is the stack's is decided by one rule, `ops.ownership.is_ours`: the exact name the stack's config
declares, the kind it declares, the ownership mark the stack wrote (a pod's env), and the owner id the
stack's own state recorded at create (`recorded_owner_ids`: the inputs of its resources and of its pending
creates; `scripts/recover` reads them before its refresh drops the pending creates). A live resource that is
the stack's and whose id the state does not hold is an orphan.
Anything else that merely looks like the stack's (another stack's, a stranger's, a network volume) is
listed as kept with the reason, and never touched.

    python -m ops.orphans STACK --cwd WORKSPACE [--delete] [--yes]

Prints one line per orphan with its $/h. `--delete` deletes them (asks first unless `--yes`). Run by
`scripts/recover` (which offers the deletion) and after a destroy by our scripts. Exit status: 0 when none
is left, 4 when orphans remain (listed, not deleted), 5 when it could not check (no RunPod credentials, or
the stack's config cannot be read: then nothing is deleted).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from common.pulumi import PulumiError
from common.stack import Stack
from components.names import DeclaredResources, declared_resources
from facts.money import HOURS_PER_MONTH, SNAPSHOT
from facts.pods import OWNER_ENV, OWNER_ID_ENV
from ops.ownership import Kind, Live, is_ours, looks_like
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config

__all__ = [
    "Live",
    "OrphanReport",
    "check",
    "find_orphans",
    "main",
    "read_live",
    "recorded_owner_ids",
    "state_ids",
]

# Compute first: a volume cannot be deleted while a pod still mounts it.
DELETE_ORDER: tuple[Kind, ...] = ("cluster", "pod", "volume", "secret")
ORPHANS_LEFT = 4
NOT_CHECKED = 5  # no RunPod credentials to list live resources with, or no readable stack config


def state_ids(deployment: dict[str, Any]) -> set[str]:
    """Every resource id a `pulumi stack export` holds, pending deletes included (they are still known)."""
    return {str(r["id"]) for r in deployment.get("resources") or [] if r.get("id")}


def recorded_owner_ids(deployment: Mapping[str, Any]) -> set[str]:
    """The owner ids (env OWNER_ID_ENV) a `pulumi stack export` holds: in its resources' inputs and in its
    pending operations' (a create cut short is recorded there before the provider is asked)."""
    pending = [op.get("resource") or {} for op in deployment.get("pending_operations") or []]
    found: set[str] = set()
    for resource in [*(deployment.get("resources") or []), *pending]:
        env = (resource.get("inputs") or {}).get("env") if isinstance(resource, dict) else None
        value = env.get(OWNER_ID_ENV) if isinstance(env, dict) else None
        if isinstance(value, str) and value:
            found.add(value)
    return found


def find_orphans(
    declared: DeclaredResources, live: Iterable[Live], known_ids: set[str], recorded: Set[str]
) -> tuple[list[Live], list[tuple[Live, str]]]:
    """(the stack's live resources whose ids the state lacks, in deletion order; the look-alikes kept,
    each with the reason it is not the stack's). `recorded`: the owner ids the stack's own state holds."""
    orphans: list[Live] = []
    kept: list[tuple[Live, str]] = []
    for r in live:
        if r.id in known_ids:
            continue
        verdict = is_ours(declared, r, recorded)
        if verdict.ours:
            orphans.append(r)
        elif looks_like(declared.stack, r.name):
            kept.append((r, verdict.reason))
    orphans.sort(key=lambda r: (DELETE_ORDER.index(r.kind), r.name))
    return orphans, kept


def _env_mark(pod: Any, name: str = OWNER_ENV) -> str | None:
    env = getattr(pod, "env", None) or {}
    value = env.get(name)
    return value if isinstance(value, str) else None


def _common(values: set[str | None]) -> str | None:
    """Every member's value when they agree, else None."""
    return values.pop() if len(values) == 1 else None


def read_live(client: Any) -> list[Live]:
    """Pods (not cluster members: their cluster is listed), clusters, volumes and secrets of the account."""
    out: list[Live] = []
    for pod in client.list_pods():
        if pod.cluster is None or not pod.cluster.id:
            cost = float(pod.cost or 0.0)
            out.append(Live("pod", pod.id, pod.name, cost, _env_mark(pod), _env_mark(pod, OWNER_ID_ENV)))
    for cluster in client.list_clusters():
        members = client.list_cluster_pods(cluster.id)
        cost = sum(float(p.cost or 0.0) for p in members)
        mark = _common({_env_mark(p) for p in members})  # every member carries the same mark, or none
        owner_id = _common({_env_mark(p, OWNER_ID_ENV) for p in members})
        out.append(Live("cluster", cluster.id, cluster.name, cost, mark, owner_id))
    for volume in client.list_volumes():
        hourly = SNAPSHOT.volume_monthly(volume.size) / HOURS_PER_MONTH  # billed per GB-month, hourly
        out.append(Live("volume", volume.id, volume.name, hourly))
    secrets, why_not = client.secrets_if_listed()  # GraphQL retired: no secrets to list (one line why)
    if why_not:
        print(f"orphans: {why_not}", file=sys.stderr)
    out += [Live("secret", s.id, s.name, 0.0, getattr(s, "description", None)) for s in secrets]
    return out


def _delete(client: Any, orphan: Live) -> None:
    # No verb for volumes: the ownership rule never finds one ours (ops/ownership.py).
    verbs: dict[Kind, Callable[[str], object]] = {
        "cluster": client.delete_cluster,
        "pod": client.delete_pod,
        "secret": client.delete_secret,
    }
    verbs[orphan.kind](orphan.id)


def shown(text: str) -> str:
    """A name as safe to print: non-ASCII and control characters escaped (full-width 3: `pod-\\uff13`)."""
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def describe(orphans: Sequence[Live]) -> str:
    rows = [f"  {o.kind:<7} {shown(o.name):<40} {shown(o.id):<24} ${o.usd_per_hour:,.2f}/h" for o in orphans]
    total = sum(o.usd_per_hour for o in orphans)
    return "\n".join([*rows, f"  total ${total:,.2f}/h"])


def describe_kept(kept: Sequence[tuple[Live, str]]) -> str:
    return "\n".join(f"  {r.kind:<7} {shown(r.name):<40} {shown(r.id):<24} kept: {why}" for r, why in kept)


def export_state(stack: str, workspace: Path) -> dict[str, Any]:
    """The stack's deployment (PulumiError when it cannot be read)."""
    return Stack(stack, workspace).export().deployment


def stack_declared(stack: str, workspace: Path) -> DeclaredResources:
    """What the stack's config (`pulumi config`, secrets left out) declares; raises ConfigError, and
    PulumiError when the config cannot be read."""
    raw = Stack(stack, workspace).config()
    project = yaml.safe_load((workspace / "Pulumi.yaml").read_text())["name"]
    return declared_resources(stack, load_stack_config(raw), str(project))


Outcome = Literal["none", "deleted", "left", "not checked"]


@dataclass(frozen=True)
class OrphanReport:
    """What a look for a stack's orphans found and did: `none` (every live resource is in the state),
    `deleted`, `left` (listed and kept), or `not checked` (no RunPod key, a config that does not parse)."""

    outcome: Outcome
    orphans: tuple[Live, ...] = ()


def check(
    stack: str,
    workspace: Path,
    *,
    delete: bool = False,
    yes: bool = False,
    ask: Callable[[str], str] = input,
    recorded: Set[str] = frozenset(),
) -> OrphanReport:
    """Look for the live RunPod resources of `stack` its state lacks; each step said on stderr. `delete`:
    delete them (asking first unless `yes`); without it, offer to (never, with `yes`). `recorded`: owner ids
    read from the stack's state earlier (recover's, before its refresh dropped the pending creates), besides
    those it holds now. PulumiError when the state or the config cannot be read."""
    from ops.workspace import TargetConflict, resolve_target
    from providers.runpod.client import RunPodClient
    from providers.runpod.errors import RunPodSettingsError

    try:  # the account and the state: one decision (ops/workspace.py), before any read
        resolve_target(os.environ)
    except TargetConflict as exc:
        print(f"orphans: not checked: {exc}", file=sys.stderr)
        return OrphanReport("not checked")
    deployment = export_state(stack, workspace)
    known, recorded = state_ids(deployment), {*recorded, *recorded_owner_ids(deployment)}
    try:
        declared = stack_declared(stack, workspace)
    except ConfigError as exc:  # without the declared names nothing can be proven the stack's
        print(f"orphans: not checked: the stack's config does not parse: {exc}", file=sys.stderr)
        return OrphanReport("not checked")
    try:
        client_ctx = RunPodClient.from_env()
    except RunPodSettingsError as exc:  # no RunPod credentials here: nothing to compare the state with
        print(f"orphans: not checked: {exc}", file=sys.stderr)
        return OrphanReport("not checked")
    with client_ctx as client:
        orphans, kept = find_orphans(declared, read_live(client), known, recorded)
        if kept:
            print(
                f"orphans: {len(kept)} live RunPod resources look like '{stack}' ones but are not "
                f"the stack's; never deleted by trainstack:\n{describe_kept(kept)}",
                file=sys.stderr,
            )
        if not orphans:
            print(f"orphans: none; every live resource of '{stack}' is in its state", file=sys.stderr)
            return OrphanReport("none")
        print(
            f"orphans: {len(orphans)} live RunPod resources of '{stack}' are not in its state (a "
            f"cut-short create; `pulumi destroy` cannot see them):\n{describe(orphans)}",
            file=sys.stderr,
        )
        if not delete:
            answer = (
                "n" if yes else ask("Delete them now? The next `up` would adopt those it declares. [y/N] ")
            )
            if not answer.lower().startswith("y"):
                print(
                    f"orphans: kept; `scripts/up {stack}` adopts them, or delete them with "
                    f"`python -m ops.orphans {stack} --cwd {workspace} --delete`",
                    file=sys.stderr,
                )
                return OrphanReport("left", tuple(orphans))
        elif not yes and not ask("Delete them? [y/N] ").lower().startswith("y"):
            return OrphanReport("left", tuple(orphans))
        for orphan in orphans:
            _delete(client, orphan)
            print(f"orphans: deleted {orphan.kind} {orphan.name} ({shown(orphan.id)})", file=sys.stderr)
    return OrphanReport("deleted", tuple(orphans))


# The exit codes of `python -m ops.orphans` and of `scripts/down` (docs/CLI.md's table).
EXIT_CODES: dict[Outcome, int] = {"none": 0, "deleted": 0, "left": ORPHANS_LEFT, "not checked": NOT_CHECKED}


def main(argv: list[str] | None = None, ask: Callable[[str], str] = input) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.orphans", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--cwd", type=Path, required=True, help="the stack's Pulumi workspace")
    parser.add_argument("--delete", action="store_true", help="delete the orphans found")
    parser.add_argument("--yes", action="store_true", help="do not ask before deleting")
    args = parser.parse_args(argv)
    try:
        report = check(args.stack, args.cwd, delete=args.delete, yes=args.yes, ask=ask)
    except PulumiError as exc:
        print(f"orphans: {exc}", file=sys.stderr)
        return 1
    return EXIT_CODES[report.outcome]


if __name__ == "__main__":
    sys.exit(main())
