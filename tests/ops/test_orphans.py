"""ops/orphans.py: the stack's live resources its state lacks, priced, and only those (issue 24.3)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from components.names import secret_name as runpod_secret_name
from ops import orphans
from ops.orphans import find_orphans, state_ids


class FakeAccount:
    """A RunPod account as the client's list and delete verbs show it."""

    def __init__(self) -> None:
        member = SimpleNamespace(id="c1", rank=0, ip="10.65.0.2")
        self.pods = [
            SimpleNamespace(id="p0", name="trainstack-dev-pod-0", cost=23.92, cluster=None),
            SimpleNamespace(id="p1", name="trainstack-dev-pod-1", cost=23.92, cluster=None),
            SimpleNamespace(id="p9", name="trainstack-dev-2-pod-0", cost=23.92, cluster=None),  # other stack
            SimpleNamespace(id="m0", name="trainstack-dev-cluster-0", cost=31.92, cluster=member),
            SimpleNamespace(id="x0", name="someone-elses-pod", cost=2.0, cluster=None),
        ]
        self.clusters = [SimpleNamespace(id="c1", name="trainstack-dev-cluster")]
        self.volumes = [SimpleNamespace(id="v1", name="trainstack-dev-volume", size=730)]
        self.secrets = [
            SimpleNamespace(id="s1", name=runpod_secret_name("dev", "HF_TOKEN")),
            SimpleNamespace(id="s2", name=runpod_secret_name("dev-2", "HF_TOKEN")),
        ]
        self.deleted: list[str] = []

    def list_pods(self) -> list[Any]:
        return self.pods

    def list_clusters(self) -> list[Any]:
        return self.clusters

    def list_cluster_pods(self, cluster_id: str) -> list[Any]:
        return [p for p in self.pods if p.cluster is not None and p.cluster.id == cluster_id]

    def list_volumes(self) -> list[Any]:
        return self.volumes

    def list_secrets(self) -> list[Any]:
        return self.secrets

    def __getattr__(self, verb: str) -> Any:
        if not verb.startswith("delete_"):
            raise AttributeError(verb)
        return lambda resource_id: self.deleted.append(f"{verb.removeprefix('delete_')} {resource_id}")


def test_only_this_stacks_names_missing_from_state_are_orphans_and_they_are_priced() -> None:
    account = FakeAccount()
    live = orphans.read_live(account)
    found = find_orphans("dev", live, known_ids={"p0", "s1"})
    assert [(o.kind, o.id) for o in found] == [("cluster", "c1"), ("pod", "p1"), ("volume", "v1")]
    by_id = {o.id: o.usd_per_hour for o in found}
    assert by_id["c1"] == pytest.approx(31.92)  # its member pods' cost, the member not listed twice
    assert by_id["p1"] == pytest.approx(23.92)
    assert by_id["v1"] == pytest.approx(0.07)  # 730 GB x $0.07/GB-month / 730 h
    assert "total $55.91/h" in orphans.describe(found)


def test_nothing_is_an_orphan_when_the_state_holds_every_id() -> None:
    live = orphans.read_live(FakeAccount())
    assert find_orphans("dev", live, {"p0", "p1", "c1", "v1", "s1"}) == []


def test_state_ids_include_pending_deletes() -> None:
    deployment = {
        "resources": [{"urn": "a", "id": "p0"}, {"urn": "a", "id": "p1", "delete": True}, {"urn": "b"}]
    }
    assert state_ids(deployment) == {"p0", "p1"}


def _run(
    monkeypatch: pytest.MonkeyPatch, account: FakeAccount, known: set[str], *argv: str, answer: str = "n"
) -> int:
    monkeypatch.setattr(orphans, "export_state", lambda stack, cwd: {"resources": [{"id": i} for i in known]})

    class Client:
        @classmethod
        def from_env(cls) -> Any:
            return cls()

        def __enter__(self) -> FakeAccount:
            return account

        def __exit__(self, *exc: object) -> None:
            return None

    import providers.runpod.client

    monkeypatch.setattr(providers.runpod.client, "RunPodClient", Client)
    return orphans.main(["dev", "--cwd", "/nowhere", *argv], ask=lambda _prompt: answer)


def test_listing_keeps_them_and_says_how_to_delete(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = FakeAccount()
    assert _run(monkeypatch, account, {"p0", "s1", "c1", "v1"}) == orphans.ORPHANS_LEFT
    err = capsys.readouterr().err
    assert "trainstack-dev-pod-1" in err and "$23.92/h" in err and "--delete" in err
    assert account.deleted == []


def test_delete_removes_only_the_orphans_compute_first(monkeypatch: pytest.MonkeyPatch) -> None:
    account = FakeAccount()
    assert _run(monkeypatch, account, {"p0", "s1"}, "--delete", "--yes") == 0
    assert account.deleted == ["cluster c1", "pod p1", "volume v1"]


def test_an_interactive_yes_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    account = FakeAccount()
    assert _run(monkeypatch, account, {"p0", "s1", "c1", "v1"}, answer="y") == 0
    assert account.deleted == ["pod p1"]


# --- ops/pending_deletes.py: a pending bucket delete against a dead endpoint never wedges (issue 25) ---


def test_only_pending_bucket_deletes_at_dead_endpoints_are_forgotten() -> None:
    from ops.pending_deletes import BUCKET_TYPE, stale, without

    dead, alive = "http://127.0.0.1:9", "http://127.0.0.1:8"
    resources: list[dict[str, Any]] = [
        {"urn": "u-bucket", "type": BUCKET_TYPE, "id": "b", "outputs": {"endpoint_url": alive}},
        {
            "urn": "u-bucket",
            "type": BUCKET_TYPE,
            "id": "b",
            "delete": True,
            "outputs": {"endpoint_url": dead},
        },
        {
            "urn": "u-other",
            "type": BUCKET_TYPE,
            "id": "c",
            "delete": True,
            "outputs": {"endpoint_url": alive},
        },
        {
            "urn": "u-pod",
            "type": "pulumi-python:dynamic/runpod:Pod",
            "id": "p",
            "delete": True,
            "outputs": {},
        },
    ]
    deployment = {"resources": resources}
    dropped = stale(deployment, reachable=lambda url: url == alive)
    assert dropped == [resources[1]]
    assert without(deployment, dropped)["resources"] == [resources[0], resources[2], resources[3]]
