"""The one rule for which live RunPod resource is a stack's: used by `scripts/down`, `scripts/recover`,
`python -m ops.orphans` and the supervisor alike. Nothing here does I/O.

    is_ours(declared: DeclaredResources, resource: Live, recorded: Set[str]) -> Verdict

`declared` is `components.names.declared_resources(stack, config, project)`: the names the stack's
config declares, per kind, and the marks the stack writes. `resource` is one live RunPod resource
(`ops.orphans.read_live` builds them from the client's listings). A resource is the stack's only when:

1. its name is ASCII and exactly one the stack declares (`trainstack-dev-pod-99` on a 1-pod stack is not,
   nor `trainstack-dev-pod-` with a full-width digit 3 after it, nor `trainstack-dev-2-pod-0`);
2. it is of the kind the stack declares under that name (a cluster named like the stack's pods is not; a
   `trainstack-dev-cluster` on a `pods` stack is not);
3. it carries the ownership mark the stack wrote, where RunPod can carry one: a pod, and every member of a
   cluster, has env `TRAINSTACK_OWNER=<project>/<stack>`; a secret has the description the stack writes;
4. it carries an **identity only the stack's own state holds**: env `TRAINSTACK_OWNER_ID` (facts/pods.py),
   a random id the provider wrote when it planned the create, which the state records (the resource's
   inputs, or its pending create when the `up` was cut short): `recorded` is the set of them
   (`ops.orphans.recorded_owner_ids`). Name and mark are the same for a same-named stack of another backend
   (the local demo's `dev` and the team's) and anyone can copy them: they never suffice (issue #62);
5. it is not a network volume or a secret: RunPod keeps nothing on a volume but its name, size and place,
   and a secret only a name and a description anyone can copy, so nothing proves either is ours (and a
   volume is someone's data). They are listed, never deleted here.

Anything else is listed with the reason, and never deleted. `Verdict.ours` is the only thing that allows a
delete; `Verdict.reason` says, in words for a terminal, why.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Set
from dataclasses import dataclass
from typing import Literal

from components.names import DeclaredResources

Kind = Literal["cluster", "pod", "volume", "secret"]


@dataclass(frozen=True)
class Live:
    """One live RunPod resource, as much as the ownership rule and the orphan listing need."""

    kind: Kind
    id: str
    name: str
    usd_per_hour: float  # what it bills now; storage priced per hour, secrets 0
    # The mark RunPod returned with it: a pod's TRAINSTACK_OWNER env value; a cluster's, when every member
    # carries the same one (None when any lacks it or they differ); a secret's description; None for a volume.
    mark: str | None = None
    # Its TRAINSTACK_OWNER_ID env value (a cluster's: every member's, when they agree); None when it has none.
    owner_id: str | None = None


@dataclass(frozen=True)
class Verdict:
    ours: bool
    reason: str


def _declared_kind(declared: DeclaredResources, name: str) -> Kind | None:
    if name in declared.pods:
        return "pod"
    if name == declared.cluster:
        return "cluster"
    if name == declared.volume:
        return "volume"
    if name in declared.secrets:
        return "secret"
    return None


def _expected_mark(declared: DeclaredResources, resource: Live) -> str:
    if resource.kind == "secret":
        return declared.secrets[resource.name]
    return declared.mark


def is_ours(declared: DeclaredResources, resource: Live, recorded: Set[str]) -> Verdict:
    """Whether `resource` is one the stack made (then, and only then, a trainstack command may delete it);
    `recorded`: the owner ids the stack's own state holds."""
    name = resource.name
    if not name.isascii() or not name.isprintable():
        return Verdict(False, "its name is not plain ASCII, so it is not a name trainstack gives")
    kind = _declared_kind(declared, name)
    if kind is None:
        return Verdict(False, f"stack '{declared.stack}' declares no resource named so")
    if kind != resource.kind:
        return Verdict(
            False, f"stack '{declared.stack}' declares that name for a {kind}, this is a {resource.kind}"
        )
    if resource.kind == "volume":
        return Verdict(
            False,
            "a network volume carries no ownership mark and may hold someone's data; if it is the stack's, "
            "`scripts/up` adopts it, or delete it yourself in the RunPod console",
        )
    if resource.mark != _expected_mark(declared, resource):
        where = "description" if resource.kind == "secret" else "env TRAINSTACK_OWNER"
        return Verdict(False, f"it lacks the {where} mark stack '{declared.stack}' writes on what it makes")
    if resource.kind == "secret":
        return Verdict(
            False,
            "a secret carries no identity only the stack's state holds (its name and description can be "
            "copied, and a same-named stack of another backend writes the same); delete it yourself if it "
            "is the stack's",
        )
    if not resource.owner_id or resource.owner_id not in recorded:
        return Verdict(
            False,
            f"its env TRAINSTACK_OWNER_ID is not one stack '{declared.stack}''s state recorded at create (a "
            "same-named stack of another backend, or a copied mark): not provably the stack's",
        )
    return Verdict(True, f"declared by stack '{declared.stack}', its mark, and its state's owner id")


def looks_like(stack: str, name: str) -> bool:
    """Whether a name resembles the stack's (same prefix after Unicode folding): worth listing as kept."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return folded.startswith(f"trainstack-{stack}-".casefold())
