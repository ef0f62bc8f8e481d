"""The HTTP chokepoint: error mapping, retries, Retry-After, deadlines, reconciliation, no leaks."""

from __future__ import annotations

import ssl

import certifi
import pytest

from facts.pods import OWNER_ENV
from providers.runpod import errors
from providers.runpod.client import RunPodClient
from providers.runpod.http import HttpCore, tls_context
from providers.runpod.ratelimit import TokenBucket
from providers.runpod.records import GpuRequest, PodCreate
from tests.providers.runpod.fake_runpod import (
    API_KEY,
    BODY_SECRET,
    NO_CAPACITY,
    SPEND_LIMIT,
    FakeRunPod,
    Fault,
)


def _body(name: str = "trainer") -> PodCreate:
    return PodCreate(
        name=name, image="img", gpu=GpuRequest(id="NVIDIA H100 80GB HBM3", count=8), cloud="SECURE"
    )


def test_429_waits_for_retry_after_then_succeeds() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/pods", Fault("status", 429, headers={"Retry-After": "7"}))
    with fake.client() as client:
        assert client.list_pods() == []
    assert fake.clock.sleeps == [7.0]
    assert fake.count("GET", "/v2/pods") == 2


def test_429_beyond_the_deadline_raises_rate_limited() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/pods", Fault("status", 429, headers={"Retry-After": "600"}))
    with fake.client(deadline_s=60) as client, pytest.raises(errors.RateLimitedError):
        client.list_pods()
    assert fake.clock.sleeps == []


def test_5xx_on_get_retries_with_growing_capped_backoff_until_success() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/pods", *[Fault("status", 503)] * 4)
    with fake.client() as client:
        client.list_pods()
    assert fake.clock.sleeps == [0.75, 1.5, 3.0, 6.0]  # rng fixed at 0.5: delay = 0.75 * base * 2**n


def test_5xx_forever_stops_at_the_total_deadline() -> None:
    fake = FakeRunPod()
    fake.fail("GET", "/v2/pods", *[Fault("status", 500)] * 100)
    with fake.client(deadline_s=120) as client, pytest.raises(errors.ServerError):
        client.list_pods()
    assert sum(fake.clock.sleeps) <= 120
    assert max(fake.clock.sleeps) <= 30
    assert fake.count("GET", "/v2/pods") < 20


@pytest.mark.parametrize(
    ("status", "detail", "exc"),
    [
        (422, BODY_SECRET, errors.InvalidRequestError),
        (402, BODY_SECRET, errors.InsufficientBalanceError),
        (404, BODY_SECRET, errors.NotFoundError),
        (401, BODY_SECRET, errors.AuthError),
        (403, BODY_SECRET, errors.AuthError),
        (409, BODY_SECRET, errors.ConflictError),
        (400, NO_CAPACITY, errors.NoCapacityError),
        (400, SPEND_LIMIT, errors.SpendLimitError),
        (400, BODY_SECRET, errors.InvalidRequestError),
    ],
)
def test_error_statuses_map_to_our_exceptions_without_retry(status: int, detail: str, exc: type) -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/pods", Fault("status", status, detail=detail))
    with fake.client() as client, pytest.raises(exc) as info:
        client.create_pod(_body())
    assert fake.count("POST", "/v2/pods") == 1
    assert fake.pods == {}
    assert info.value.status == status and info.value.path == "/v2/pods"


def test_lost_create_response_is_reconciled_without_a_duplicate() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/pods", Fault("lose"))
    with fake.client() as client:
        pod = client.create_pod(_body())
    assert list(fake.pods) == [pod.id]
    assert fake.count("POST", "/v2/pods") == 1


def test_5xx_after_send_on_create_lists_first_then_retries_once_nothing_was_made() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/pods", Fault("status", 502))
    with fake.client() as client:
        pod = client.create_pod(_body())
    assert list(fake.pods) == [pod.id]
    assert fake.count("POST", "/v2/pods") == 2
    # before the retry the client listed pods to look for the first attempt's pod
    posts = [i for i, c in enumerate(fake.calls) if c == ("POST", "/v2/pods")]
    assert ("GET", "/v2/pods") in fake.calls[posts[0] + 1 : posts[1]]


def test_a_live_same_name_pod_of_the_same_spec_is_adopted_not_rented_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What an `up` killed after RunPod accepted the create leaves behind (see providers/runpod/adopt.py).
    import pulumi

    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: said.append(message))
    fake = FakeRunPod()
    with fake.client() as client:
        first = client.create_pod(_body())
        assert said == []  # a plain create says nothing
        again = client.create_pod(_body())
    assert again.id == first.id and set(fake.pods) == {first.id}
    assert fake.count("POST", "/v2/pods") == 1
    assert said == [
        f"adopted the live pod {first.id} that an interrupted up had already rented under this name, instead "
        "of renting a second one"
    ]


def test_reconcile_ignores_an_older_same_name_pod_of_another_spec() -> None:
    fake = FakeRunPod()
    other = PodCreate(
        name="trainer", image="img", gpu=GpuRequest(id="NVIDIA H100 80GB HBM3", count=4), cloud="SECURE"
    )
    with fake.client() as client:
        old = client.create_pod(other)
        fake.fail("POST", "/v2/pods", Fault("lose"))
        new = client.create_pod(_body())
    assert new.id != old.id and set(fake.pods) == {old.id, new.id}


def test_connect_error_on_post_is_retried_because_nothing_was_sent() -> None:
    fake = FakeRunPod()
    fake.fail("POST", "/v2/pods", Fault("connect"))
    with fake.client() as client:
        client.create_pod(_body())
    assert fake.count("POST", "/v2/pods") == 2 and len(fake.pods) == 1  # the first never left


def test_graphql_errors_in_a_200_are_mapped() -> None:
    fake = FakeRunPod()
    with fake.client() as client, pytest.raises(errors.NotFoundError) as info:
        client.update_secret_value("missing", "v")
    assert info.value.status == 200 and "/graphql" in str(info.value)


@pytest.mark.parametrize("status", [400, 422])
def test_a_refused_create_names_the_inputs_the_body_points_at(status: int) -> None:
    fake = FakeRunPod()
    refused = [
        f"$.image: {BODY_SECRET} is not a valid reference",
        f"$: additional properties 'bogus' {BODY_SECRET}",
    ]
    fake.fail("POST", "/v2/pods", Fault("status", status, errors=refused))
    with fake.client() as client, pytest.raises(errors.InvalidRequestError) as info:
        client.create_pod(_body())
    text = str(info.value)
    assert "it named image, bogus; fix those inputs" in text, text
    assert BODY_SECRET not in text and "valid reference" not in text


def test_error_text_never_contains_the_key_or_the_response_body() -> None:
    for status in (400, 401, 402, 403, 404, 409, 422, 429, 500, 503):
        fake = FakeRunPod()
        fake.fail("GET", "/v2/pods/*", *[Fault("status", status, headers={"Retry-After": "1000"})] * 50)
        with fake.client(deadline_s=5) as client, pytest.raises(errors.RunPodError) as info:
            client.get_pod("pod-x")
        text = f"{info.value} {info.value!r} {info.value.__cause__!r} {info.value.__context__!r}"
        assert API_KEY not in text and BODY_SECRET not in text, status
        assert "/v2/pods/{id}" in text


def test_graphql_error_text_does_not_leak_the_message() -> None:
    fake = FakeRunPod()
    with fake.client() as client, pytest.raises(errors.RunPodError) as info:
        client.update_secret_value("missing", "sekrit-value")
    assert BODY_SECRET not in str(info.value) and "sekrit-value" not in str(info.value)


def test_missing_key_says_how_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(errors.RunPodSettingsError, match="pulumi config set --secret runpod:apiKey"):
        RunPodClient.from_env()


def test_token_bucket_never_admits_more_than_the_quota_in_any_minute() -> None:
    fake = FakeRunPod()
    bucket = TokenBucket(60, clock=fake.clock.clock, sleep=fake.clock.sleep)
    stamps = []
    for _ in range(200):
        bucket.acquire()
        stamps.append(fake.clock.now)
    for i, start in enumerate(stamps):
        in_window = [t for t in stamps[i:] if t < start + 60]
        assert len(in_window) <= 60
    assert stamps[-1] - stamps[0] < 240  # and it is not needlessly slow


def _context_of(core: HttpCore) -> ssl.SSLContext:
    return core._http._transport._pool._ssl_context  # type: ignore[attr-defined]


def test_clients_share_one_tls_context_per_ca_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh context per client loads the whole CA bundle (~30 ms of CPU each); a 128-pod destroy built
    # 128 of them one after another.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first, second = HttpCore("https://api.runpod.io", "k"), HttpCore("https://api.runpod.io", "k")
    assert _context_of(first) is _context_of(second) is tls_context()
    assert _context_of(first).verify_mode == ssl.CERT_REQUIRED and _context_of(first).check_hostname
    # The CA bundle named by SSL_CERT_FILE (as httpx honours it) gets a context of its own.
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    custom = HttpCore("https://api.runpod.io", "k")
    assert _context_of(custom) is tls_context() and _context_of(custom) is not _context_of(first)


def test_limiter_keeps_every_window_under_its_quota() -> None:
    """RunPod's RateLimit-Policy example is 60/min, 3000/h, 50000/day; a long `up` must stay under all."""
    fake = FakeRunPod()
    bucket = TokenBucket(60, per_hour=3000, per_day=50000, clock=fake.clock.clock, sleep=fake.clock.sleep)
    stamps = []
    for _ in range(6500):  # a bit over two hours at the hour window's pace
        bucket.acquire()
        stamps.append(fake.clock.now)
    for window, quota in ((60, 60), (3600, 3000)):
        start = 0
        for end, stamp in enumerate(stamps):
            while stamps[start] <= stamp - window:
                start += 1
            assert end - start + 1 <= quota, (window, stamp)
    hours = (stamps[-1] - stamps[0]) / 3600
    assert 6500 / hours > 2900  # and close to the hour quota, not needlessly slow


def test_a_window_the_server_reports_spent_is_drained() -> None:
    fake = FakeRunPod()
    bucket = TokenBucket(60, per_hour=3000, clock=fake.clock.clock, sleep=fake.clock.sleep)
    bucket.drain("hour")
    before = fake.clock.now
    bucket.acquire()
    assert fake.clock.now - before >= 3600 / (3000 - 60) * 0.99  # waited for one hour-window token


def test_a_same_name_pod_without_our_mark_is_never_adopted() -> None:
    """Issue #62: adopting a stranger's pod (or another stack's) named like ours would make it the stack's,
    and its `down` would delete it."""
    fake = FakeRunPod()
    ours = _body().model_copy(update={"env": {OWNER_ENV: "trainstack/dev"}})
    with fake.client() as client:
        stranger = client.create_pod(_body().model_copy(update={"env": {OWNER_ENV: "someone/else"}}))
        made = client.create_pod(ours)
        again = client.create_pod(ours)  # the same stack's own, after a crash: adopted
    assert made.id != stranger.id and again.id == made.id
    assert fake.count("POST", "/v2/pods") == 2
