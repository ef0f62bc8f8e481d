"""The ASGI layer in front of the API: counters, faults, auth, quotas, 405/501, a transaction per call."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import defaultdict
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.keys import grant_for, read_only_graphql, refusal
from emulator.problems import ApiError, problem
from emulator.quota import Quota
from emulator.spec import Spec
from emulator.world import World

log = logging.getLogger("emulator")


class Counters:
    """Requests per endpoint (method + templated path) and per outcome."""

    def __init__(self) -> None:
        self.by_endpoint: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.total = 0  # every outcome recorded since the last clear: the sum over `by_endpoint`
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def record(self, endpoint: str, outcome: str) -> None:
        self.by_endpoint[endpoint][outcome] += 1
        self.total += 1
        for total, waiter in self._waiters:
            if self.total >= total and not waiter.done():
                waiter.set_result(None)

    async def reach(self, total: int, timeout_s: float) -> bool:
        """Wait until `total` outcomes are recorded (at most `timeout_s`); True if they were. A test that
        acts at the k-th request waits here instead of polling `view` (tests/e2e/test_crashes.py)."""
        if self.total >= total:
            return True
        entry = (total, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(entry[1]), timeout_s)
            return True
        except TimeoutError:
            return False  # not within timeout_s (a caller asks again; a wait already there answers at once)
        finally:
            self._waiters.remove(entry)

    def view(self) -> dict[str, Any]:
        endpoints = {e: dict(c) for e, c in sorted(self.by_endpoint.items())}
        total_429 = sum(c.get("429", 0) for c in endpoints.values())
        return {"endpoints": endpoints, "rateLimited": total_429}

    def clear(self) -> None:
        self.by_endpoint.clear()
        self.total = 0


def _abort_connection(send: Send) -> None:
    """Close the client's socket with no reply at all.

    ASGI has no message for this, so reach the transport through uvicorn's response cycle (the owner
    of the bound `send`); this is why the admission layer must be the outermost layer.
    """
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("dropping connections needs the admission layer directly under uvicorn")
    transport.abort()


class Admission:
    """Wraps the app; admin and unknown paths pass straight through.

    `implemented` holds (METHOD, spec path template) of every operation the API answers; any other
    documented operation gets 501 naming it, never a 404 a client would read as "already gone".
    """

    def __init__(
        self,
        app: ASGIApp,
        world: World,
        spec: Spec,
        counters: Counters,
        implemented: set[tuple[str, str]],
    ) -> None:
        self.app, self.world, self.spec, self.counters = app, world, spec, counters
        self.implemented = implemented
        self.buckets: dict[str, Quota] = {}
        # One request at a time between BEGIN and COMMIT: SQLite has one transaction per connection.
        self._serial = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            _hide_api_key(scope)
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path.startswith("/v2/") or path == "/graphql"):
            await self.app(scope, receive, send)
            return
        endpoint = self.spec.template(scope["method"], path)
        self.world.tick()
        faults = self.world.faults
        faulty = faults.applies(endpoint)
        if faulty and await self._early_fault(endpoint, scope, receive, send):
            return
        try:
            headers = self._admit(scope)
            self._route(scope, headers)
        except ApiError as exc:
            self.counters.record(endpoint, str(exc.status))
            await problem(exc)(scope, receive, send)
            return
        lose = faulty and faults.take_lose()
        async with self._serial:
            await self._transaction(scope, receive, self._sender(endpoint, send, headers, lose))
        if lose:
            self.counters.record(endpoint, "lost")
            _abort_connection(send)
            await asyncio.sleep(0)  # let uvicorn see the disconnect before it looks for a reply

    async def _transaction(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request in one SQLite transaction; a server error rolls back the file and memory."""
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        store = self.world.store
        store.begin()
        try:
            await self.app(scope, receive, watch)
        except Exception:
            # Starlette has already answered 500; keep the connection (uvicorn would drop it on a raise).
            log.exception("server error in %s %s; its writes are rolled back", scope["method"], scope["path"])
            if not status:
                await problem(ApiError(500, "internal error; nothing was changed"))(scope, receive, send)
            status = 500
        except BaseException:
            store.rollback()
            self.world.reload()
            raise
        if status >= 500:
            store.rollback()
            self.world.reload()
        else:
            store.commit()

    async def _early_fault(self, endpoint: str, scope: Scope, receive: Receive, send: Send) -> bool:
        faults = self.world.faults
        if faults.config.latencyMs:
            await asyncio.sleep(faults.config.latencyMs / 1000)
        if faults.take_drop():
            self.counters.record(endpoint, "dropped")
            _abort_connection(send)
            await asyncio.sleep(0)
            return True
        if faults.take_error():
            status = faults.config.errorStatus
            self.counters.record(endpoint, str(status))
            await problem(ApiError(status, "injected fault: the upstream failed, nothing was changed"))(
                scope, receive, send
            )
            return True
        return False

    def _admit(self, scope: Scope) -> dict[str, str]:
        """401 for a missing, malformed or unknown key; 403 for a key without the right (keys.py); 429."""
        key = _presented_key(scope)
        if key is None:
            raise ApiError(401, "missing bearer token: send 'Authorization: Bearer <RUNPOD_API_KEY>'.")
        settings = self.world.settings
        grant = grant_for(key, settings.api_key, settings.read_only_key, settings.restricted_keys)
        if grant is None:
            # The spec's UnauthorizedError: "missing, malformed, expired, or invalid" is 401, not 403.
            raise ApiError(401, "invalid bearer token: check RUNPOD_API_KEY.")
        scope.setdefault("state", {})["read_only"] = read_only_graphql(grant)
        # Buckets are keyed by a digest so the key itself is kept nowhere but the settings.
        quota = self._quota(hashlib.sha256(key.encode()).hexdigest())
        headers = quota.headers()
        if (why := refusal(grant, scope["method"], scope["path"])) is not None:
            # ForbiddenError: "the bearer token is valid, but it does not grant access" (GraphQL
            # refuses mutations itself: a read-only key may still query).
            raise ApiError(403, why, headers=headers)
        return headers

    def _quota(self, bucket_key: str) -> Quota:
        now, quotas = self.world.now(), self.world.limits.quotas()
        quota = self.buckets.setdefault(bucket_key, Quota(now, quotas))
        exceeded = quota.take(now, quotas)
        if exceeded is not None:
            headers = quota.headers() | {"Retry-After": str(quota.retry_after())}
            raise ApiError(429, f"rate limit exceeded for the {exceeded} window", headers=headers)
        return quota

    def _route(self, scope: Scope, headers: dict[str, str]) -> None:
        """405 with every method the path allows; 501 for documented operations not emulated."""
        method, path = scope["method"], scope["path"]
        found = self.spec.route(path)
        if found is None:
            return  # not in the spec: FastAPI answers (404, or the GraphQL endpoint)
        template, methods = found
        if method not in methods:
            allow = {"Allow": ", ".join(methods)}
            detail = f"{method} is not allowed on {template}; allowed: {', '.join(methods)}."
            raise ApiError(405, detail, headers=headers | allow)
        if (method, template) not in self.implemented:
            op = self.spec.match(method, path)
            name = op.operation_id if op else f"{method} {template}"
            raise ApiError(
                501, f"The local RunPod does not implement {name} ({method} {template}).", headers=headers
            )

    def _sender(self, endpoint: str, send: Send, headers: dict[str, str], lose: bool) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.counters.record(endpoint, str(message["status"]))
                extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            if not lose:
                await send(message)

        return wrapped


def _presented_key(scope: Scope) -> str | None:
    """The bearer token, or on /graphql the `api_key` query parameter RunPod's GraphQL docs use."""
    auth: bytes = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, key = auth.decode("latin-1").partition(" ")
    if scheme.lower() == "bearer" and key.strip():
        return key.strip()
    if scope["path"] == "/graphql":
        hidden = scope.get("state", {}).get("query_api_key")
        return str(hidden) if hidden else None
    return None


def _hide_api_key(scope: Scope) -> None:
    """Take `api_key` out of the query string before anything can log it (uvicorn's access log reads
    this same scope); the admission layer keeps the value in the request state for `_presented_key`."""
    raw = scope.get("query_string", b"")
    if not raw:
        return
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    keys = [v for k, v in pairs if k == "api_key"]
    if not keys:
        return
    scope.setdefault("state", {})["query_api_key"] = keys[-1]
    scope["query_string"] = urlencode([(k, v) for k, v in pairs if k != "api_key"]).encode("latin-1")
