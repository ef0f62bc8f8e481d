"""The HTTP chokepoint under `RunPodClient`: timeouts, pacing, retries, error mapping, reconciliation.

Every request: the shared token bucket first; a timeout always; errors mapped by `errors.classify`;
429 waits for `Retry-After`; 5xx and connection errors retried with capped exponential backoff and jitter
under a total deadline. A POST is never replayed blindly: when its outcome is unknown (read timeout,
dropped connection, 5xx after sending) it raises `UncertainRequestError`, and `create_reconciled`
lists and matches the unique name before any retry. Knows no RunPod paths: those live in `client.py`.
"""

from __future__ import annotations

import functools
import json
import os
import random
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar
from urllib.parse import quote

import httpx

from common.backoff import Backoff
from providers.runpod import errors
from providers.runpod.ratelimit import Clock, Sleep, TokenBucket, shared_bucket

_IDEMPOTENT = frozenset({"GET", "PUT", "PATCH", "DELETE"})
# Exceptions raised before any byte of the request left: safe to retry even for POST.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

T = TypeVar("T")


def _detail(response: httpx.Response) -> str:
    """Text used only to classify an error (never quoted): problem `detail`/`title` or GraphQL messages."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict):
        return f"{body.get('title', '')} {body.get('detail', '')}"
    return ""


def _refused(response: httpx.Response) -> list[object]:
    """A problem response's `errors` array (entries like "$.image: ..."); parsed for field names only."""
    try:
        body = response.json()
    except ValueError:
        return []
    entries = body.get("errors") if isinstance(body, dict) else None
    return list(entries) if isinstance(entries, list) else []


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None  # an HTTP-date or garbage: fall back to our own backoff


@functools.cache
def _tls_context(_ca_settings: tuple[str | None, str | None]) -> ssl.SSLContext:
    """One TLS context per process and CA setting, shared by every client (contexts are thread-safe).

    httpx builds a fresh one for each client it makes, loading the whole CA bundle: ~30 ms of CPU under
    the GIL, and clients here live for one provider call. httpx's own builder still reads the CA setting
    (SSL_CERT_FILE, SSL_CERT_DIR); it is the cache key only, so a changed setting gets its own context."""
    return httpx.create_ssl_context()


def tls_context() -> ssl.SSLContext:
    return _tls_context((os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")))


def _spent_windows(header: str) -> list[str]:
    """Names of the windows a `RateLimit` header reports with no request left (`r=0`)."""
    spent = []
    for member in header.split(","):
        name, _, params = member.strip().partition(";")
        if "r=0" in params.replace(" ", "").split(";"):
            spent.append(name.strip('"'))
    return spent


class HttpCore:
    """Transport, pacing and retry policy for one short-lived client (see the module docstring)."""

    graphql_path: ClassVar[str] = ""  # set by the subclass that knows RunPod's paths

    def __init__(
        self,
        api_url: str,
        api_key: str,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.monotonic,
        limiter: TokenBucket | None = None,
        timeout_s: float = 30.0,
        deadline_s: float = 180.0,
        backoff: Backoff | None = None,
        rng: Callable[[], float] = random.random,
        read_only: bool = False,
    ) -> None:
        self.read_only = read_only  # a preview's client: writes raise PreviewWriteError, unsent
        self.sleep = sleep
        self.clock = clock
        self.deadline_s = deadline_s
        self._limiter = limiter if limiter is not None else shared_bucket()
        self._backoff = backoff or Backoff()
        self._rng = rng
        self._http = httpx.Client(
            base_url=api_url,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            follow_redirects=False,
            verify=tls_context(),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        template: str,
        *,
        path: Mapping[str, str] | None = None,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        deadline_s: float | None = None,
        write: bool | None = None,
    ) -> Any:
        """Send one logical request; returns parsed JSON (None for 204). See the module docstring.
        `write` is False for a read sent as POST (a GraphQL query); by default it follows the method."""
        write = method in errors.WRITES if write is None else write
        if self.read_only and write:
            raise errors.PreviewWriteError(method, template)
        url = template.format(**{k: quote(v, safe="") for k, v in (path or {}).items()})
        deadline = self.clock() + (self.deadline_s if deadline_s is None else deadline_s)
        attempt = 0
        while True:
            self._limiter.acquire()
            retry_in, error = self._attempt(method, template, url, body, query, attempt, write)
            if error is None:
                return retry_in
            if not isinstance(retry_in, float) or self.clock() + retry_in > deadline:
                raise error
            self.sleep(retry_in)
            attempt += 1

    def _attempt(
        self,
        method: str,
        template: str,
        url: str,
        body: Any,
        query: Mapping[str, str] | None,
        attempt: int,
        write: bool,
    ) -> tuple[Any, errors.RunPodError | None]:
        """One try. Returns (result, None) on success, else (seconds to wait or None if final, error)."""
        try:
            response = self._http.request(method, url, json=body, params=query)
        except _NOT_SENT:
            err: errors.RunPodError = errors.TransportError(f"cannot reach RunPod [{method} {template}]")
            return self._backoff.delay(attempt, self._rng), err
        except httpx.TransportError:
            if method not in _IDEMPOTENT:
                return None, errors.UncertainRequestError(
                    f"RunPod connection dropped after sending; outcome unknown [{method} {template}]"
                )
            return self._backoff.delay(attempt, self._rng), errors.TransportError(
                f"RunPod connection failed [{method} {template}]"
            )
        if response.is_success:
            self._observe_quota(response)
            return (None if response.status_code == 204 or not response.content else response.json()), None
        err = errors.classify(
            response.status_code,
            _detail(response),
            method=method,
            path=template,
            refused=_refused(response),
            write=write,
        )
        if response.status_code == 429:
            wait = _retry_after(response)
            return (wait if wait is not None else self._backoff.delay(attempt, self._rng)), err
        if response.status_code >= 500 and response.status_code != 501:  # 501 is final: not implemented
            if method not in _IDEMPOTENT:
                return None, errors.UncertainRequestError(
                    f"RunPod failed with HTTP {response.status_code} after the request was sent; "
                    f"outcome unknown [{method} {template}]"
                )
            return self._backoff.delay(attempt, self._rng), err
        return None, err

    def stream_events(
        self,
        template: str,
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
        max_events: int = 100,
        idle_s: float = 3.0,
    ) -> list[Any]:
        """The `data:` payloads (JSON) of a Server-Sent Events GET, until `max_events` arrived or the stream
        was idle for `idle_s` (RunPod's pod logs backfill `tail` lines, then stay open for live ones).
        One attempt: a failure raises the same mapped error as `request`."""
        url = template.format(**{k: quote(v, safe="") for k, v in (path or {}).items()})
        self._limiter.acquire()
        events: list[Any] = []
        timeout = httpx.Timeout(idle_s, connect=10.0)
        headers = {"Accept": "text/event-stream"}
        try:
            with self._http.stream("GET", url, params=query, timeout=timeout, headers=headers) as response:
                if not response.is_success:
                    response.read()
                    raise errors.classify(
                        response.status_code, _detail(response), method="GET", path=template, refused=[]
                    )
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        try:
                            events.append(json.loads(line[5:].strip()))
                        except ValueError:
                            continue  # a payload that is not JSON is skipped, never echoed
                        if len(events) >= max_events:
                            break
        except httpx.ReadTimeout:
            pass  # the backfill is over; live lines are not waited for
        except httpx.TransportError:
            raise errors.TransportError(f"cannot reach RunPod [GET {template}]") from None
        return events

    def _observe_quota(self, response: httpx.Response) -> None:
        # `RateLimit: "minute";r=0;t=12, "hour";r=2800;t=1812, ...` -> a window RunPod says is spent
        # (it may count requests from other processes with this key) is spent for us too.
        for window in _spent_windows(response.headers.get("RateLimit", "")):
            self._limiter.drain(window)

    def graphql(self, document: str, variables: Mapping[str, Any], *, mutation: bool) -> dict[str, Any]:
        """POST a GraphQL document with variables; an `errors` array (HTTP 200) raises a mapped error."""
        payload = {"query": document, "variables": dict(variables)}
        method = "POST" if mutation else "QUERY"  # QUERY: a read, safe to retry (sent as POST)
        result = self._graphql_post(payload, method)
        errs = result.get("errors") if isinstance(result, dict) else None
        if errs:
            text = " ".join(str(e.get("message", "")) for e in errs if isinstance(e, dict))
            status = 404 if "not found" in text.lower() else 400
            err = errors.classify(status, text, method="POST", path=self.graphql_path, reported_status=200)
            if type(err) in (errors.InvalidRequestError, errors.ApiError):
                raise errors.GraphQLError(
                    "RunPod GraphQL returned errors for this operation",
                    status=200,
                    method="POST",
                    path=self.graphql_path,
                )
            raise err
        data = result.get("data") if isinstance(result, dict) else None
        if not isinstance(data, dict):
            raise errors.GraphQLError(
                "RunPod GraphQL returned no data", status=200, method="POST", path=self.graphql_path
            )
        return data

    def _graphql_post(self, payload: dict[str, Any], method: str) -> Any:
        if method == "POST":
            return self.request("POST", self.graphql_path, body=payload)
        # Reads are idempotent: let the chokepoint retry 5xx/transport errors as for a GET.
        return self._as_idempotent(lambda: self.request("POST", self.graphql_path, body=payload, write=False))

    def _as_idempotent(self, call: Callable[[], T]) -> T:
        deadline = self.clock() + self.deadline_s
        attempt = 0
        while True:
            try:
                return call()
            except errors.UncertainRequestError:
                delay = self._backoff.delay(attempt, self._rng)
                if self.clock() + delay > deadline:
                    raise
                self.sleep(delay)
                attempt += 1

    def create_reconciled(
        self,
        post: Callable[[], T],
        find_new: Callable[[set[str]], list[T]],
        existing_ids: set[str],
        what: str,
    ) -> T:
        """Run a create; after an uncertain outcome adopt the one new match by name, else retry the POST.

        `existing_ids` are the ids with this name listed before the first POST, so an older resource
        that happens to share the name (a replacement being created before its predecessor is deleted)
        is never adopted by mistake.
        """
        deadline = self.clock() + self.deadline_s
        attempt = 0
        while True:
            try:
                return post()
            except errors.UncertainRequestError:
                found = find_new(existing_ids)
                if len(found) == 1:
                    return found[0]
                if len(found) > 1:
                    raise errors.ConflictError(
                        f"{len(found)} new {what}s share this name after an uncertain create; "
                        "delete the extras in the RunPod console",
                        status=409,
                        method="POST",
                        path="(reconcile)",
                    ) from None
                delay = self._backoff.delay(attempt, self._rng)
                if self.clock() + delay > deadline:
                    raise
                self.sleep(delay)
                attempt += 1

    # ---- endpoints ------------------------------------------------------------------------------
