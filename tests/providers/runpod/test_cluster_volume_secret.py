"""`runpod:InstantCluster`, `runpod:NetworkVolume` and `runpod:Secret` provider verbs against the fake."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from providers.runpod import catalog, errors
from providers.runpod import secret as secret_mod
from providers.runpod.cluster import InstantClusterProvider
from providers.runpod.registry import RegistryAuthProvider
from providers.runpod.secret import SecretProvider
from providers.runpod.volume import NetworkVolumeProvider
from tests.providers.runpod.fake_runpod import BODY_SECRET, FakeRunPod, Fault

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def _fresh_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAINSTACK_POLL_INTERVAL_S", "10")
    catalog.reset_cache()
    yield
    catalog.reset_cache()


def _checked(provider: Any, inputs: dict[str, Any], olds: dict[str, Any] | None = None) -> dict[str, Any]:
    result = provider.check(olds or {}, inputs)
    assert result.failures == []
    return dict(result.inputs)


# ---- cluster ---------------------------------------------------------------------------------------

CLUSTER = {"name": "train", "image": "img", "gpu_type_id": H100, "gpu_count_per_pod": 8.0, "pod_count": 8.0}


def test_cluster_check_prices_all_gpus_and_bounds_the_node_count() -> None:
    provider = InstantClusterProvider(FakeRunPod().factory())
    assert _checked(provider, CLUSTER)["cost_per_hour"] == pytest.approx(4.19 * 64)
    bad = provider.check({}, {**CLUSTER, "pod_count": 9})
    assert [f.property for f in bad.failures] == ["pod_count"]


def test_cluster_create_waits_for_ranked_members_and_lists_nodes_in_rank_order() -> None:
    fake = FakeRunPod()
    provider = InstantClusterProvider(fake.factory())
    outs = provider.create(_checked(provider, CLUSTER)).outs or {}
    assert [n["rank"] for n in outs["nodes"]] == list(range(8))
    assert outs["nodes"][0]["ip"] == "10.65.0.2" and outs["nodes"][0]["ssh_port"]
    assert outs["network_cidr"] == "10.65.0.0/16" and outs["data_center_id"] == "US-TX-3"
    assert outs["primary_ssh"] == f"1.2.3.4:{outs['nodes'][0]['ssh_port']}"


def test_cluster_rename_is_in_place_everything_else_replaces() -> None:
    fake = FakeRunPod()
    provider = InstantClusterProvider(fake.factory())
    created = provider.create(_checked(provider, CLUSTER))
    olds = created.outs or {}
    renamed = _checked(provider, {**CLUSTER, "name": "train2"})
    assert provider.diff(created.id, olds, renamed).replaces == []
    assert provider.diff(created.id, olds, _checked(provider, {**CLUSTER, "pod_count": 4})).replaces == [
        "pod_count"
    ]
    outs = provider.update(created.id, olds, renamed).outs or {}
    assert fake.clusters[created.id]["name"] == "train2" and len(outs["nodes"]) == 8


def test_cluster_read_and_delete_when_gone() -> None:
    fake = FakeRunPod()
    provider = InstantClusterProvider(fake.factory())
    created = provider.create(_checked(provider, CLUSTER))
    provider.delete(created.id, {})
    assert fake.pods == {} and provider.read(created.id, created.outs or {}).id is None
    provider.delete(created.id, {})


# ---- volume ----------------------------------------------------------------------------------------

VOLUME = {"name": "ckpt", "size_gb": 2000.0, "data_center_id": "US-TX-3"}


def test_volume_prices_first_tb_and_beyond() -> None:
    inputs = _checked(NetworkVolumeProvider(FakeRunPod().factory()), VOLUME)
    assert inputs["storage_cost_per_month"] == pytest.approx(1000 * 0.07 + 1000 * 0.05)


def test_volume_shrink_fails_at_check_naming_the_field() -> None:
    provider = NetworkVolumeProvider(FakeRunPod().factory())
    result = provider.check(_checked(provider, VOLUME), {**VOLUME, "size_gb": 100})
    assert [f.property for f in result.failures] == ["size_gb"]
    assert "cannot shrink" in result.failures[0].reason


def test_volume_grows_in_place_and_replaces_on_data_center() -> None:
    fake = FakeRunPod()
    provider = NetworkVolumeProvider(fake.factory())
    created = provider.create(_checked(provider, VOLUME))
    olds = created.outs or {}
    bigger = _checked(provider, {**VOLUME, "size_gb": 3000}, olds)
    assert provider.diff(created.id, olds, bigger).replaces == []
    assert provider.diff(
        created.id, olds, _checked(provider, {**VOLUME, "data_center_id": "EU-RO-1"})
    ).replaces == ["data_center_id"]
    outs = provider.update(created.id, olds, bigger).outs or {}
    assert fake.volumes[created.id]["size"] == 3000 and outs["volume_id"] == created.id
    assert [b for m, _, b in fake.bodies if m == "PATCH"] == [{"size": 3000}]


def test_volume_lost_create_response_makes_no_duplicate() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/network-volumes", Fault("lose"))
    provider = NetworkVolumeProvider(fake.factory())
    created = provider.create(_checked(provider, VOLUME))
    assert list(fake.volumes) == [created.id]


# ---- secret ----------------------------------------------------------------------------------------

SECRET = {"name": "HF_TOKEN", "value": "hf_super_secret_value", "description": "hub"}


def test_secret_value_never_reaches_outputs_and_changes_are_detected_by_hash() -> None:
    fake = FakeRunPod()
    provider = SecretProvider(fake.factory())
    checked = _checked(provider, SECRET)
    assert checked["reference"] == "{{ RUNPOD_SECRET_HF_TOKEN }}"
    created = provider.create(checked)
    outs = created.outs or {}
    assert "value" not in outs and SECRET["value"] not in repr(outs)
    assert fake.secret_values[created.id] == SECRET["value"]
    assert not provider.diff(created.id, outs, checked).changes
    rotated = _checked(provider, {**SECRET, "value": "new-value"})
    diff = provider.diff(created.id, outs, rotated)
    assert diff.changes and diff.replaces == []
    new_outs = provider.update(created.id, outs, rotated).outs or {}
    assert fake.secret_values[created.id] == "new-value" and "value" not in new_outs
    assert new_outs["value_hash"] != outs["value_hash"]
    assert provider.diff(created.id, outs, _checked(provider, {**SECRET, "name": "OTHER"})).replaces == [
        "name"
    ]


def test_secret_check_failure_does_not_echo_the_value() -> None:
    provider = SecretProvider(FakeRunPod().factory())
    result = provider.check({}, {**SECRET, "name": "bad name!"})
    assert [f.property for f in result.failures] == ["name"]
    assert SECRET["value"] not in " ".join(f.reason for f in result.failures)


def test_secret_lost_create_response_is_reconciled_and_gone_secret_is_dropped() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/graphql", Fault("lose"))  # the list before create is sent first: let it pass
    fake.faults[("POST", "/graphql")].insert(0, Fault("none"))
    provider = SecretProvider(fake.factory())
    created = provider.create(_checked(provider, SECRET))
    assert list(fake.secrets) == [created.id]
    provider.delete(created.id, created.outs or {})
    assert provider.read(created.id, created.outs or {}).id is None
    provider.delete(created.id, created.outs or {})  # already gone: still succeeds


def test_a_secret_left_by_an_interrupted_up_is_adopted_and_given_the_new_value() -> None:
    # Names are unique per account and derived from the stack, so a same-name secret is ours.
    fake = FakeRunPod()
    provider = SecretProvider(fake.factory())
    first = provider.create(_checked(provider, SECRET))
    fake.secret_values[first.id] = "stale"
    again = provider.create(_checked(provider, SECRET))
    assert again.id == first.id and list(fake.secrets) == [first.id]
    assert fake.secret_values[first.id] == SECRET["value"]


def test_secret_hash_matches_only_its_value_and_reads_older_pbkdf2_hashes() -> None:
    stored = secret_mod.hash_value("hf_token_one")
    assert stored.startswith("hmac-sha256$") and "hf_token_one" not in stored
    assert secret_mod.matches("hf_token_one", stored)
    assert not secret_mod.matches("hf_token_two", stored)
    assert secret_mod.hash_value("hf_token_one") != stored  # a fresh salt each time
    # What versions before the switch wrote: PBKDF2-SHA256, rounds and salt in the string.
    salt = bytes(range(16))
    legacy_digest = hashlib.pbkdf2_hmac("sha256", b"hf_token_one", salt, 1000).hex()
    legacy = f"pbkdf2-sha256$1000${salt.hex()}${legacy_digest}"
    assert secret_mod.matches("hf_token_one", legacy)
    assert not secret_mod.matches("hf_token_two", legacy)
    for broken in (None, "", "hmac-sha256$zz$00", "md5$aa$bb", "pbkdf2-sha256$0$00$00", stored + "$x"):
        assert not secret_mod.matches("hf_token_one", broken)


# ---- registry credential ---------------------------------------------------------------------------

REGISTRY = {"name": "ghcr-team", "username": "bot", "password": "ghp_super_secret_value"}


def test_registry_lost_create_is_reconciled_and_the_password_stays_out() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/registries", Fault("lose"))
    provider = RegistryAuthProvider(fake.factory())
    created = provider.create(_checked(provider, REGISTRY))
    assert list(fake.registries) == [created.id]  # the lost reply did not make a second credential
    assert fake.registries[created.id]["password"] == REGISTRY["password"]  # sent once, in the body
    assert REGISTRY["password"] not in repr(created.outs)


def test_registry_delete_answered_501_is_an_error_not_gone() -> None:
    fake = FakeRunPod()
    provider = RegistryAuthProvider(fake.factory())
    created = provider.create(_checked(provider, REGISTRY))
    fake.fail("DELETE", f"/v2/registries/{created.id}", Fault("status", status=501, detail=BODY_SECRET))
    with pytest.raises(errors.ApiError, match="does not implement") as exc:
        provider.delete(created.id, created.outs or {})
    assert BODY_SECRET not in str(exc.value) and fake.count("DELETE", f"/v2/registries/{created.id}") == 1


def test_the_ownership_mark_alone_does_not_replace_a_cluster_made_before_it() -> None:
    """A cluster's env is fixed at create: gaining the mark alone must not replace it (refused on prod)."""
    provider = InstantClusterProvider(FakeRunPod().factory())
    olds = _checked(provider, {**CLUSTER, "env": {"A": "1"}})
    marked = _checked(provider, {**CLUSTER, "env": {"A": "1", "TRAINSTACK_OWNER": "trainstack/prod"}})
    assert not provider.diff("c", olds, marked).changes
    changed = _checked(provider, {**CLUSTER, "env": {"A": "2", "TRAINSTACK_OWNER": "trainstack/prod"}})
    assert provider.diff("c", olds, changed).replaces == ["env"]
