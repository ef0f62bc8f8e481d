"""Issue #45: scripts/reconcile against the local RunPod (in process): everything billed matched against every
stack's state; unowned resources reported with $/h and age; --delete removes only what carries this project's
mark, is in no state and is older than the grace, never a look-alike, a stranger's or a volume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.config import DEFAULT_API_KEY, DEFAULT_READ_ONLY_KEY
from facts.pods import OWNER_ID_ENV
from harness.inprocess import InProcessRunPod, in_process
from ops import orphans, reconcile
from ops.reconcile import Billed, marked_stack
from tests.emulator.conftest import cluster_body, gql, pod_body

PROJECT = "trainstack"
GRACE_S = 6 * 3600.0
OURS = {"TRAINSTACK_OWNER": "trainstack/dev"}


@pytest.fixture
def rp(tmp_path: Path) -> Iterator[InProcessRunPod]:
    with in_process(tmp_path, spend_limit=500) as server:  # 5 pods and a 16-GPU cluster: over $80/h
        yield server


def make(rp: InProcessRunPod) -> dict[str, str]:
    """The account: what a stack owns, what it lost, a look-alike, a stranger's, a volume, secrets. Returns
    name -> id. All but `young` were made 7 h ago."""
    ids: dict[str, str] = {}
    with httpx.Client(base_url=rp.base_url, transport=rp.transport) as api:
        api.headers["Authorization"] = f"Bearer {DEFAULT_API_KEY}"

        def pod(name: str, env: dict[str, str]) -> None:
            ids[name] = api.post("/v2/pods", json=pod_body(name, env=env)).json()["id"]

        def secret(name: str, description: str) -> None:
            doc = "mutation($i: SecretCreateInput!) { secretCreate(input: $i) { id } }"
            variables = {"name": name, "value": "v", "description": description}
            ids[name] = gql(api, doc, i=variables)["data"]["secretCreate"]["id"]

        pod("trainstack-dev-pod-0", OURS)  # in dev's state
        pod("trainstack-dev-pod-1", OURS | {OWNER_ID_ENV: "oid-dev-1"})  # lost by a cut-short `up`: ours
        # Issue #62: dev's name and mark, an owner id dev's state never recorded (another backend's dev).
        pod("trainstack-dev-pod-4", OURS | {OWNER_ID_ENV: "theirs"})
        pod("trainstack-dev-pod-2", {})  # a look-alike: no mark
        pod("trainstack-dev-pod-3", {"TRAINSTACK_OWNER": "someone-else/dev"})  # another project's mark
        pod("trainstack-gone-pod-0", {"TRAINSTACK_OWNER": "trainstack/gone"})  # a stack the backend lacks
        owner = {"TRAINSTACK_OWNER": "trainstack/prod", OWNER_ID_ENV: "oid-prod"}
        body = cluster_body("trainstack-prod-cluster", env=owner)
        ids["trainstack-prod-cluster"] = api.post("/v2/clusters", json=body).json()["id"]
        volume = {"name": "trainstack-dev-volume", "size": 100, "dataCenter": "US-TX-3"}
        ids["trainstack-dev-volume"] = api.post("/v2/network-volumes", json=volume).json()["id"]
        secret("trainstack-dev-hf_token", "trainstack stack dev: HF_TOKEN")  # ours, lost
        secret("my-token", "trainstack stack dev: HF_TOKEN")  # a copied description on another name
        rp.world.clock.advance(7 * 3600)
        pod(
            "young", {"TRAINSTACK_OWNER": "trainstack/search", OWNER_ID_ENV: "oid-search"}
        )  # a create in flight
    return ids


def round_(
    rp: InProcessRunPod, states: dict[str, set[str]] | None, remove: bool
) -> tuple[int, list[str], list[str]]:
    lines: list[str] = []
    sent: list[str] = []
    with rp.client(DEFAULT_API_KEY) as client:
        code = reconcile.run(
            client, states, project=PROJECT, now=rp.world.now(), grace_s=GRACE_S, remove=remove,
            say=lines.append, notify=sent.append,
        )  # fmt: skip
    return code, lines, sent


def live_names(rp: InProcessRunPod) -> set[str]:
    world: Any = rp.world
    return {r.name for r in [*world.pods.values(), *world.clusters.values(), *world.volumes.values(),
                             *world.secrets.values()]}  # fmt: skip


def test_unowned_are_reported_with_cost_and_age_and_only_ours_are_deleted(rp: InProcessRunPod) -> None:
    ids = make(rp)
    # Each state: its resources' ids and the owner ids it recorded (a cut-short create's, pending).
    states = {
        "dev": {ids["trainstack-dev-pod-0"], "oid-dev-1"},
        "search": {"oid-search"},
        "prod": {"oid-prod"},
    }
    code, lines, sent = round_(rp, states, remove=False)
    assert code == reconcile.EXIT_UNOWNED
    unowned = [ln for ln in lines if ln.startswith("unowned")]
    assert len(unowned) == 10 and not any("trainstack-dev-pod-0 " in ln for ln in lines)  # owned: silent
    cluster = next(ln for ln in unowned if "trainstack-prod-cluster" in ln)
    assert "(2 pods)" in cluster and "$63.84/h" in cluster and "7.0 h" in cluster  # 2 x 8 H100 SXM
    assert len(sent) == 1 and "10 billed RunPod resources no stack owns" in sent[0]
    assert live_names(rp) >= {"trainstack-dev-pod-1", "trainstack-prod-cluster"}  # a report deletes nothing

    code, lines, sent = round_(rp, states, remove=True)
    deleted = sorted(ln.split()[3] for ln in lines if ln.startswith("reconcile: deleted"))
    assert deleted == ["trainstack-dev-pod-1", "trainstack-prod-cluster"]
    assert code == reconcile.EXIT_UNOWNED  # the rest is still billed, still reported
    left = live_names(rp)
    kept_names = ["trainstack-dev-pod-0", "trainstack-dev-pod-2", "trainstack-dev-pod-3", "young"]
    for kept in [*kept_names, "trainstack-gone-pod-0", "trainstack-dev-volume", "my-token"]:
        assert kept in left, kept
    assert {"trainstack-dev-pod-4", "trainstack-dev-hf_token"} <= left  # not provably dev's: kept
    reasons = {ln.split()[2]: ln for ln in lines if ln.startswith("unowned")}
    assert "not one dev's state recorded" in reasons["trainstack-dev-pod-4"]
    assert "can be copied" in reasons["trainstack-dev-hf_token"]
    assert "no ownership mark" in reasons["trainstack-dev-pod-2"]
    assert "no ownership mark" in reasons["trainstack-dev-pod-3"]
    assert (
        "younger than the grace" in reasons["young"] and "network volume" in reasons["trainstack-dev-volume"]
    )


def test_an_unreadable_state_deletes_nothing_and_exits_2(rp: InProcessRunPod) -> None:
    make(rp)
    before = live_names(rp)
    code, lines, _ = round_(rp, None, remove=True)
    assert code == reconcile.EXIT_NOT_CHECKED and live_names(rp) == before
    assert "nothing deleted" in lines[-1]


def test_a_clean_account_exits_0_and_a_read_only_key_can_report(rp: InProcessRunPod) -> None:
    ids = make(rp)
    with rp.client(DEFAULT_READ_ONLY_KEY) as reader:
        billed = reconcile.read_billed(reader)
    assert {b.id for b in billed} == set(ids.values())  # cluster members under their cluster
    everything = {"all": set(ids.values())}
    assert round_(rp, everything, remove=True)[0] == reconcile.EXIT_CLEAN


def test_with_graphql_gone_reconcile_passes_and_names_the_secrets_it_cannot_see(
    rp: InProcessRunPod, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #67: GraphQL (RunPod's only secrets API) answering 410 fails no round: the secrets are left out
    with one line; a secret listed while GraphQL answered and deleted after it stopped is kept, and named."""
    ids = make(rp)
    states = {"dev": {ids["trainstack-dev-pod-0"]}, "search": set(), "prod": set()}
    world: Any = rp.world
    world.set_limits(world.limits.model_copy(update={"graphql": "gone"}))
    code, lines, _ = round_(rp, states, remove=True)
    assert code == reconcile.EXIT_UNOWNED and not any("hf_token" in ln for ln in lines)
    assert (
        "RunPod console secrets not listed: GraphQL, their only API, answered HTTP 410"
        in capsys.readouterr().err
    )
    assert "trainstack-dev-hf_token" in live_names(rp)

    # one listed while GraphQL answered, deleted after it stopped: kept, and named for a person
    secret = Billed("secret", ids["trainstack-dev-hf_token"], "trainstack-dev-hf_token", 0.0, None, None)
    with rp.client(DEFAULT_API_KEY) as client:
        assert reconcile.delete(client, secret) is False
    said = capsys.readouterr().err
    assert "'trainstack-dev-hf_token'" in said and "RunPod console" in said and "410 Gone" in said


def test_with_graphql_gone_the_orphan_sweep_of_down_and_recover_passes(
    rp: InProcessRunPod, capsys: pytest.CaptureFixture[str]
) -> None:
    make(rp)
    world: Any = rp.world
    world.set_limits(world.limits.model_copy(update={"graphql": "gone"}))
    with rp.client(DEFAULT_API_KEY) as client:
        live = orphans.read_live(client)
    assert {r.kind for r in live} == {"pod", "cluster", "volume"}  # every billed kind, no secret
    assert "orphans: RunPod console secrets not listed" in capsys.readouterr().err


def test_the_mark_must_be_exactly_ours() -> None:
    def pod(name: str, mark: str | None) -> Billed:
        return Billed("pod", "p", name, 1.0, mark, 0.0)

    assert marked_stack(pod("anything", "trainstack/dev"), PROJECT) == "dev"
    assert marked_stack(pod("x", "trainstack/"), PROJECT) is None
    assert marked_stack(pod("x", "trainstack/dev/extra"), PROJECT) is None
    assert marked_stack(pod("x", "trainstackx/dev"), PROJECT) is None
    assert marked_stack(pod("trainstack-dev-pod-\uff13", "trainstack/dev"), PROJECT) is None  # full-width 3
    secret = Billed("secret", "s", "trainstack-dev-hf_token", 0.0, "trainstack stack dev: HF_TOKEN", 0.0)
    assert marked_stack(secret, PROJECT) == "dev"
    assert marked_stack(Billed("volume", "v", "trainstack-dev-volume", 0.1, None, 0.0), PROJECT) is None


FAKE_PULUMI = """#!/bin/sh
# the shapes the real CLI prints (checked against v3.274.1 on a file backend)
case "$1 $2" in
  "stack ls") echo '[{"name": "dev", "current": true}, {"name": "prod", "current": false}]' ;;
  "stack export")
    if [ "$4" = "prod" ] && [ -n "$BREAK_PROD" ]; then echo "error: no such stack" >&2; exit 255; fi
    echo '{"version": 3, "deployment": {"resources": [{"urn": "u", "id": "id-'"$4"'"}, {"urn": "stack"}]}}' ;;
  *) exit 2 ;;
esac
"""


def test_pulumi_states_reads_every_backend_stack_and_none_when_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake-cli"
    fake.write_text(FAKE_PULUMI)
    fake.chmod(0o755)
    said: list[str] = []
    states = reconcile.pulumi_states(tmp_path, said.append, str(fake))
    assert states == {"dev": {"id-dev"}, "prod": {"id-prod"}}
    monkeypatch.setenv("BREAK_PROD", "1")
    assert reconcile.pulumi_states(tmp_path, said.append, str(fake)) is None
    assert "no such stack" in said[-1]


@pytest.mark.parametrize("hours", ["nan", "-1", "inf", "0", "0.5"])
def test_a_grace_that_would_call_a_create_in_flight_lost_is_refused(
    hours: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #62: `--grace-hours nan` or `-1` deleted a pod created seconds ago (a create in flight). Refused
    with exit 2 before anything is read (no RunPod key needed, no state read)."""
    assert reconcile.main(["--delete", "--grace-hours", hours, "--project", PROJECT]) == 2
    err = capsys.readouterr().err
    assert f"--grace-hours {float(hours):g}: must be a finite number of hours, at least 1" in err
    assert len(err.strip().splitlines()) == 1


def test_a_pod_created_seconds_ago_is_never_deleted() -> None:
    young = Billed("pod", "p1", "trainstack-dev-pod-1", 3.99, "trainstack/dev", created=1000.0, owner_id="o")
    states = {"dev": {"o"}}
    [finding] = reconcile.reconcile(
        [young], states, PROJECT, now=1005.0, grace_s=reconcile.MIN_GRACE_H * 3600
    )
    assert finding.action == "report" and "younger than the grace" in finding.reason
    for grace_s in (float("nan"), -3600.0, float("inf"), 0.0):
        with pytest.raises(ValueError):
            reconcile.reconcile([young], states, PROJECT, now=1005.0, grace_s=grace_s)
