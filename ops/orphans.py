"""Live RunPod resources with a stack's unique names that its state lacks: list them, or delete them.

A create cut short by a kill (or a `pulumi destroy` run before the next `up` could adopt it) leaves a
resource billing at RunPod that the state does not know: `pulumi destroy` cannot see it. RunPod resources have
no tags, so ownership is the name trainstack gave it (components/names.py `owned_names`): a
live pod, cluster, network volume or secret whose name is one of this stack's and whose id the state does
not hold is this stack's orphan. Anything else (another stack's, a stranger's) is never touched.

    python -m ops.orphans STACK --cwd WORKSPACE [--delete] [--yes]

Prints one line per orphan with its $/h. `--delete` deletes them (asks first unless `--yes`). Run by
`scripts/recover` (which offers the deletion) and after a destroy by our scripts. Exit status: 0 when none
is left, 4 when orphans remain (listed, not deleted).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from components.names import owned_names
from facts.money import HOURS_PER_MONTH, SNAPSHOT

Kind = Literal["cluster", "pod", "volume", "secret"]
# Compute first: a volume cannot be deleted while a pod still mounts it.
DELETE_ORDER: tuple[Kind, ...] = ("cluster", "pod", "volume", "secret")
ORPHANS_LEFT = 4
NOT_CHECKED = 5  # no RunPod credentials to list live resources with


@dataclass(frozen=True)
class Live:
    """One live RunPod resource, as much as the orphan check needs."""

    kind: Kind
    id: str
    name: str
    usd_per_hour: float  # what it bills now; storage priced per hour, secrets 0


def state_ids(deployment: dict[str, Any]) -> set[str]:
    """Every resource id a `pulumi stack export` holds, pending deletes included (they are still known)."""
    return {str(r["id"]) for r in deployment.get("resources") or [] if r.get("id")}


def find_orphans(stack: str, live: Iterable[Live], known_ids: set[str]) -> list[Live]:
    """The live resources named as this stack names them whose ids the state lacks, in deletion order."""
    owned = owned_names(stack)
    found = [r for r in live if owned[r.kind](r.name) and r.id not in known_ids]
    return sorted(found, key=lambda r: (DELETE_ORDER.index(r.kind), r.name))


def read_live(client: Any) -> list[Live]:
    """Pods (not cluster members: their cluster is listed), clusters, volumes and secrets of the account."""
    out: list[Live] = []
    for pod in client.list_pods():
        if pod.cluster is None or not pod.cluster.id:
            out.append(Live("pod", pod.id, pod.name, float(pod.cost or 0.0)))
    for cluster in client.list_clusters():
        cost = sum(float(p.cost or 0.0) for p in client.list_cluster_pods(cluster.id))
        out.append(Live("cluster", cluster.id, cluster.name, cost))
    for volume in client.list_volumes():
        hourly = SNAPSHOT.volume_monthly(volume.size) / HOURS_PER_MONTH  # billed per GB-month, hourly
        out.append(Live("volume", volume.id, volume.name, hourly))
    out += [Live("secret", s.id, s.name, 0.0) for s in client.list_secrets()]
    return out


def delete(client: Any, orphan: Live) -> None:
    verbs: dict[Kind, Callable[[str], object]] = {
        "cluster": client.delete_cluster,
        "pod": client.delete_pod,
        "volume": client.delete_volume,
        "secret": client.delete_secret,
    }
    verbs[orphan.kind](orphan.id)


def describe(orphans: Sequence[Live]) -> str:
    rows = [f"  {o.kind:<7} {o.name:<40} {o.id:<24} ${o.usd_per_hour:,.2f}/h" for o in orphans]
    total = sum(o.usd_per_hour for o in orphans)
    return "\n".join([*rows, f"  total ${total:,.2f}/h"])


def export_state(stack: str, workspace: Path) -> dict[str, Any]:
    done = subprocess.run(
        ["pulumi", "stack", "export", "--stack", stack, "--cwd", str(workspace), "--non-interactive"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"orphans: `pulumi stack export --stack {stack}` failed: {done.stderr.strip()}")
    deployment: dict[str, Any] = json.loads(done.stdout).get("deployment") or {}
    return deployment


def main(argv: list[str] | None = None, ask: Callable[[str], str] = input) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.orphans", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--cwd", type=Path, required=True, help="the stack's Pulumi workspace")
    parser.add_argument("--delete", action="store_true", help="delete the orphans found")
    parser.add_argument("--yes", action="store_true", help="do not ask before deleting")
    args = parser.parse_args(argv)

    from providers.runpod.client import RunPodClient
    from providers.runpod.errors import RunPodSettingsError

    known = state_ids(export_state(args.stack, args.cwd))
    try:
        client_ctx = RunPodClient.from_env()
    except RunPodSettingsError as exc:  # no RunPod credentials here: nothing to compare the state with
        print(f"orphans: not checked: {exc}", file=sys.stderr)
        return NOT_CHECKED
    with client_ctx as client:
        orphans = find_orphans(args.stack, read_live(client), known)
        if not orphans:
            print(
                f"orphans: none; every live resource named for '{args.stack}' is in its state",
                file=sys.stderr,
            )
            return 0
        print(
            f"orphans: {len(orphans)} live RunPod resources carry '{args.stack}' names but are not in its "
            f"state (a cut-short create; `pulumi destroy` cannot see them):\n{describe(orphans)}",
            file=sys.stderr,
        )
        if not args.delete:
            answer = (
                "n"
                if args.yes
                else ask("Delete them now? The next `up` would adopt those it declares. [y/N] ")
            )
            if not answer.lower().startswith("y"):
                print(
                    f"orphans: kept; `scripts/up {args.stack}` adopts them, or delete them with "
                    f"`python -m ops.orphans {args.stack} --cwd {args.cwd} --delete`",
                    file=sys.stderr,
                )
                return ORPHANS_LEFT
        elif not args.yes and not ask("Delete them? [y/N] ").lower().startswith("y"):
            return ORPHANS_LEFT
        for orphan in orphans:
            delete(client, orphan)
            print(f"orphans: deleted {orphan.kind} {orphan.name} ({orphan.id})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
