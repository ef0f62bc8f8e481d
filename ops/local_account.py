"""The local RunPod as one account: its spend limit, what each stack holds there, and how to free it.

A real RunPod account has one spend limit for everything it runs. The local RunPod models that: its limit is
the highest one any stack declares (`trainstack:runpod_spend_limit_per_hour` in stacks/Pulumi.<stack>.yaml,
RunPod's default where unset), and when the stacks still running there leave too little room for the next
one, `scripts/up` says so in one line naming `scripts/down` instead of failing on RunPod's spend-limit error.

    python -m ops.local_account room STACK     exit 1 with that line when STACK would not fit
    python -m ops.local_account left           the local stacks still holding anything (scripts/down)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.names import owner
from facts.money import DEFAULT_SPEND_LIMIT_PER_HOUR
from stackconfig import files

REPO = Path(__file__).resolve().parents[1]
_LIMIT_KEY = "trainstack:runpod_spend_limit_per_hour"


def declared_limits(repo: Path = REPO) -> dict[str, float]:
    """Each stack's declared account spend limit, USD/h."""
    limits = {}
    for stack in files.stack_names(repo / "stacks"):
        limits[stack] = float(
            files.read_config(stack, repo / "stacks").get(_LIMIT_KEY) or DEFAULT_SPEND_LIMIT_PER_HOUR
        )
    return limits


def account_limit(limits: Mapping[str, float]) -> float:
    """One account for every local stack: the highest limit any of them declares."""
    return max(limits.values(), default=DEFAULT_SPEND_LIMIT_PER_HOUR)


def marked_stack(pod: Mapping[str, Any]) -> str:
    """The stack a pod's ownership mark (env TRAINSTACK_OWNER, `<project>/<stack>`) names; '?' without one.
    Never the name: `trainstack-dev-pod-0-pod-0` is stack `dev-pod-0`'s, not `dev`'s (issue #62)."""
    mark = pod.get("owner")
    project, slash, stack = mark.partition("/") if isinstance(mark, str) else ("", "", "")
    return stack if project and slash and stack else "?"


def spend_by_stack(live: Mapping[str, Any]) -> dict[str, float]:
    """USD/h billed now per stack, from the local RunPod's /_admin/live answer, by each pod's mark (pods
    without one: '?')."""
    spend: dict[str, float] = {}
    for pod in live.get("pods") or []:
        cost = float(pod.get("cost") or 0)
        if cost > 0:
            stack = marked_stack(pod)
            spend[stack] = round(spend.get(stack, 0.0) + cost, 4)
    return spend


def room_note(stack: str, need: float, limit: float, spend: Mapping[str, float]) -> str | None:
    """The one line that explains why `stack` (needing `need` USD/h) does not fit, or None if it fits.

    The stack's own running pods are not counted: an `up` of a running stack replaces or keeps them."""
    others = {s: c for s, c in spend.items() if s != stack}
    used = sum(others.values())
    if used + need <= limit + 1e-9:
        return None
    running = ", ".join(f"{s} (${c:.2f}/h)" for s, c in sorted(others.items()))
    stop = " or ".join(f"`scripts/down {s}`" for s in sorted(others) if s != "?") or "`scripts/down STACK`"
    return (
        f"the local RunPod is one account with a ${limit:g}/h spend limit (the highest any stack declares); "
        f"{running or 'nothing'} still running leaves ${max(limit - used, 0):.2f}/h, and '{stack}' needs "
        f"${need:.2f}/h: stop the others first with {stop} (or `pulumi destroy --stack <name>`)"
    )


def stack_cost(stack: str, repo: Path = REPO) -> float:
    """The hourly cost the policy pack estimates for the stack, from its stack file."""
    from stackconfig.pricing import cost_per_hour

    return cost_per_hour(files.load(stack, repo / "stacks", warn=lambda _: None))


def _live() -> dict[str, Any]:
    import httpx

    response = httpx.get(f"{os.environ['RUNPOD_API_URL']}/_admin/live", timeout=10)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def leftovers(live: Mapping[str, Any]) -> dict[str, list[str]]:
    """What the local RunPod still holds, by owning stack ('?' for names trainstack did not give)."""
    held: dict[str, list[str]] = {}
    members = {str(p.get("clusterId")): p for p in live.get("pods") or [] if p.get("clusterId")}
    for kind in ("pods", "clusters", "volumes"):
        for item in live.get(kind) or []:
            if kind == "pods" and item.get("clusterId"):
                continue  # counted with its cluster
            name = str(item.get("name") or "")
            if kind == "pods":
                stack = marked_stack(item)
            elif kind == "clusters":
                stack = marked_stack(members.get(str(item.get("id")), {}))
            else:  # a volume carries no mark: its name says whose it looks like, for this listing only
                stack = owner(name) or "?"
            held.setdefault(stack, []).append(name)
    return held


def room(stack: str) -> str | None:
    """Why the running local RunPod has no room for `stack` (room_note over the live account); None: room."""
    return room_note(stack, stack_cost(stack), account_limit(declared_limits()), spend_by_stack(_live()))


def left() -> list[str]:
    """A line per stack the running local RunPod still holds something of; none when it is empty."""
    return [
        f"  {stack}: {len(names)} ({', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''})"
        for stack, names in sorted(leftovers(_live()).items())
    ]


def main(argv: list[str]) -> int:
    if argv[:1] == ["room"] and len(argv) == 2:
        note = room(argv[1])
        if note:
            print(f"scripts/up: {note}", file=sys.stderr)
            return 1
        return 0
    if argv == ["left"]:
        for line in left():
            print(line)
        return 0
    print("usage: python -m ops.local_account room STACK | left", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
