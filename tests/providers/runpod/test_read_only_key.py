"""Issue #45: a preview's Read Only key reads everything a preview reads, and no write gets through.

In process (harness/inprocess.py): the local RunPod's app, admission layer included, behind an httpx
transport; the emulator's request counters say what reached it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.config import DEFAULT_API_KEY, DEFAULT_READ_ONLY_KEY
from harness.inprocess import InProcessRunPod, in_process
from providers.runpod import errors
from providers.runpod.client import RunPodClient
from tests.emulator.conftest import pod_body

RESTRICTED = "restricted-pods-read"


@pytest.fixture
def rp(tmp_path: Path) -> Iterator[InProcessRunPod]:
    with in_process(tmp_path, restricted_keys={RESTRICTED: {"pods": "read", "catalog": "read"}}) as server:
        yield server


def client(rp: InProcessRunPod, key: str, *, read_only: bool = False) -> RunPodClient:
    return rp.client(key, read_only=read_only)


def test_a_read_only_key_reads_pods_catalog_billing_and_secrets(rp: InProcessRunPod) -> None:
    with client(rp, DEFAULT_API_KEY) as owner:
        owner.request("POST", "/v2/pods", body=pod_body("trainstack-dev-pod-0"))
    rp.counters.clear()
    with client(rp, DEFAULT_READ_ONLY_KEY) as reader:
        assert [p.name for p in reader.list_all_pods()] == ["trainstack-dev-pod-0"]
        assert reader.list_gpu_types()  # the capacity read of every preview
        assert "records" in reader.request("GET", "/v2/billing/pods", query={"bucketSize": "day"})
        assert reader.list_secrets() == []  # a GraphQL query, sent as POST: still a read
    outcomes = {e: set(c) for e, c in rp.counters.view()["endpoints"].items()}
    assert all(o == {"200"} for o in outcomes.values()), outcomes


def test_a_write_under_a_read_only_key_is_403_and_says_a_preview_never_writes(rp: InProcessRunPod) -> None:
    with client(rp, DEFAULT_READ_ONLY_KEY) as reader:
        with pytest.raises(errors.WriteRefusedError) as rest:
            reader.request("POST", "/v2/pods", body=pod_body())
        with pytest.raises(errors.WriteRefusedError) as mutation:
            reader.create_secret("trainstack_dev_TOKEN", "s3cr3t", None)
    for refused in (rest.value, mutation.value):
        assert refused.status == 403 and isinstance(refused, errors.AuthError)
        assert "a preview never writes" in str(refused) and "scripts/up" in str(refused)
        assert DEFAULT_READ_ONLY_KEY not in str(refused) and "s3cr3t" not in str(refused)
    assert rp.world.pods == {} and rp.world.secrets == {}


def test_a_preview_client_refuses_writes_before_sending_even_with_a_write_key(rp: InProcessRunPod) -> None:
    """TRAINSTACK_READ_ONLY=1: the client itself refuses, so a preview handed the write key spends nothing."""
    with client(rp, DEFAULT_API_KEY, read_only=True) as preview:
        assert preview.list_all_pods() == []
        for write in (
            lambda: preview.request("POST", "/v2/pods", body=pod_body()),
            lambda: preview.request("DELETE", "/v2/pods/{id}", path={"id": "abc"}),
            lambda: preview.create_secret("trainstack_dev_TOKEN", "s3cr3t", None),
        ):
            with pytest.raises(errors.PreviewWriteError, match=r"a preview never writes.*not sent"):
                write()
    assert rp.writes() == {"POST /graphql": {"200": 1}}  # the secret create's listing (a query), no write
    assert rp.world.pods == {}


def test_a_restricted_key_reads_what_it_was_granted_and_nothing_else(rp: InProcessRunPod) -> None:
    with client(rp, RESTRICTED) as restricted:
        assert restricted.list_all_pods() == []
        with pytest.raises(errors.AuthError, match="no access to this resource") as other:
            restricted.request("GET", "/v2/network-volumes")
        assert not isinstance(other.value, errors.WriteRefusedError)  # a read refused is not a write
        with pytest.raises(errors.WriteRefusedError):
            restricted.request("POST", "/v2/pods", body=pod_body())
