"""Issue #62's invariant as a property, on the pure decisions (no server): whatever the shell
(TRAINSTACK_LOCAL, a loopback or real RUNPOD_API_URL, a key, a backend or none) and whatever lives in the
accounts (the stack's own resources, a same-named stack's of another backend, copies of its names and marks,
look-alike names), a command never deletes a resource its own stack's state did not create.

The world: two accounts (the local RunPod, the team's), three backends (the local demo's, the team's, a file
backend of a test's own), the same stack names in each. A resource is created by one (backend, stack) and
carries that stack's mark and an owner id that backend's state records; strangers copy names and marks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from common.pulumi import default_backend
from components.names import declared_resources, owner_mark, pod_name
from ops.orphans import find_orphans
from ops.ownership import Live
from ops.reconcile import MIN_GRACE_H, Billed, reconcile
from ops.workspace import REPO, TargetConflict, resolve_target
from stackconfig.loader import load_stack_config

PROJECT = "trainstack"
STACKS = ("dev", "dev-pod-0", "prod")
BACKENDS = {
    "demo": default_backend(REPO),
    "own-file": "file:///tmp/a-test-backend",
    "team": "s3://team-state",
}
LOCAL_URLS = ("http://127.0.0.1:8080", "http://LOCALHOST:1", "http://127.1:2", "http://[::ffff:127.0.0.1]:3")
REAL_URLS = ("https://api.runpod.io", "http://10.0.0.5:8080", "http://127.0.0.1.example.com")
NOW = 10 * 24 * 3600.0


@dataclass(frozen=True)
class Made:
    """One live pod: which account holds it, who made it (a backend and stack, or None: a stranger)."""

    account: str  # "local" | "team"
    creator: tuple[str, str] | None
    live: Live
    created: float


shells = st.fixed_dictionaries(
    {},
    optional={
        "TRAINSTACK_LOCAL": st.sampled_from(["1", "0", ""]),
        "RUNPOD_API_URL": st.sampled_from(LOCAL_URLS + REAL_URLS + ("",)),
        "RUNPOD_API_KEY": st.sampled_from(["rpa_TEAMKEY", "local-runpod-key", ""]),
        "PULUMI_BACKEND_URL": st.sampled_from([*BACKENDS.values(), ""]),
    },
)

names = st.one_of(
    st.builds(pod_name, st.sampled_from(STACKS), st.integers(0, 3)),
    st.sampled_from(["trainstack-dev-pod-\uff10", "TrainStack-dev-pod-0", "trainstack-dev-2-pod-0", "x"]),
)


@st.composite
def worlds(draw: st.DrawFn) -> list[Made]:
    made: list[Made] = []
    for i in range(draw(st.integers(0, 12))):
        account = draw(st.sampled_from(["local", "team"]))
        backend = draw(st.sampled_from(["team"] if account == "team" else ["demo", "own-file"]))
        stack = draw(st.sampled_from(STACKS))
        stranger = draw(st.booleans())
        name = draw(names) if stranger else pod_name(stack, draw(st.integers(0, 1)))
        mark = draw(st.sampled_from([owner_mark(PROJECT, s) for s in STACKS] + [None])) if stranger else None
        owner_id = draw(st.sampled_from([None, f"copied-{i}"])) if stranger else f"{backend}/{stack}/{i}"
        creator = None if stranger else (backend, stack)
        live = Live("pod", f"pod-{i}", name, 4.0, mark or owner_mark(PROJECT, stack), owner_id)
        made.append(Made(account, creator, live, draw(st.sampled_from([NOW - 5, NOW - 7 * 24 * 3600]))))
    return made


def _states(world: list[Made], backend: str, lost: set[str]) -> dict[str, tuple[set[str], set[str]]]:
    """Per stack of `backend`: (the ids its state holds, the owner ids it recorded). A `lost` id was cut
    short: its owner id is recorded (a pending create), its id is not."""
    states: dict[str, tuple[set[str], set[str]]] = {s: (set(), set()) for s in STACKS}
    for m in world:
        if m.creator is not None and m.creator[0] == backend:
            ids, recorded = states[m.creator[1]]
            recorded.add(str(m.live.owner_id))
            if m.live.id not in lost:
                ids.add(m.live.id)
    return states


def _account_read(env: dict[str, str]) -> str:
    target = resolve_target(env, REPO)
    return "local" if target.local else "team"


def _backend_read(env: dict[str, str]) -> str:
    url = env.get("PULUMI_BACKEND_URL") or BACKENDS["demo"]
    return next(name for name, known in BACKENDS.items() if known == url)


@settings(max_examples=150, deadline=None)
@given(env=shells, world=worlds(), lost=st.sets(st.sampled_from([f"pod-{i}" for i in range(12)])))
def test_no_shell_makes_a_command_delete_what_its_stack_did_not_create(
    env: dict[str, str], world: list[Made], lost: set[str]
) -> None:
    try:
        account = _account_read(env)
    except TargetConflict:
        return  # refused before any read: nothing deleted
    backend = _backend_read(env)
    # The target rule never pairs the team's account with the local demo's backend, nor the reverse.
    assert (account, backend) not in {("team", "demo"), ("local", "team")}, env
    live = [m for m in world if m.account == account]
    states = _states(world, backend, lost)
    by_id = {m.live.id: m for m in live}
    for stack in STACKS:  # recover --delete-orphans / down of each stack
        declared = declared_resources(stack, load_stack_config({"cluster": {"nodes": 2}}), PROJECT)
        ids, recorded = states[stack]
        orphans, _kept = find_orphans(declared, [m.live for m in live], ids, recorded)
        for orphan in orphans:
            assert by_id[orphan.id].creator == (backend, stack), (env, orphan)
    # reconcile --delete over every stack of the backend
    billed = [
        Billed("pod", m.live.id, m.live.name, 4.0, m.live.mark, m.created, owner_id=m.live.owner_id)
        for m in live
    ]
    every = {s: ids | recorded for s, (ids, recorded) in states.items()}
    for finding in reconcile(billed, every, PROJECT, NOW, MIN_GRACE_H * 3600):
        if finding.action == "delete":
            made = by_id[finding.resource.id]
            assert made.creator is not None and made.creator[0] == backend, (env, finding)
            assert made.created <= NOW - MIN_GRACE_H * 3600  # never a create in flight


@settings(max_examples=100, deadline=None)
@given(env=shells)
def test_the_target_and_its_backend_are_one_decision(env: dict[str, str]) -> None:
    try:
        target = resolve_target(env, REPO)
    except TargetConflict as refused:
        assert "\n" not in str(refused) and "rpa_TEAMKEY" not in str(refused)
        return
    backend = env.get("PULUMI_BACKEND_URL", "")
    if target.local:
        assert not backend or backend.startswith("file://")
        assert not target.runpod_url or target.runpod_url in {u.rstrip("/") for u in LOCAL_URLS}
    else:
        assert backend and backend != BACKENDS["demo"] and env.get("TRAINSTACK_LOCAL") != "1"
