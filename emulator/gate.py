"""The ASGI layer in front of the API: counters, injected faults, bearer auth and the rate limit."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
from collections import defaultdict
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.problems import ApiError, problem
from emulator.spec import Spec
from emulator.world import World


class Counters:
    """Requests per endpoint (method + templated path) and per outcome."""

    def __init__(self) -> None:
        self.by_endpoint: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def record(self, endpoint: str, outcome: str) -> None:
        self.by_endpoint[endpoint][outcome] += 1

    def view(self) -> dict[str, Any]:
        endpoints = {e: dict(c) for e, c in sorted(self.by_endpoint.items())}
        total_429 = sum(c.get("429", 0) for c in endpoints.values())
        return {"endpoints": endpoints, "rateLimited": total_429}

    def clear(self) -> None:
        self.by_endpoint.clear()


class TokenBucket:
    """`rate` requests per minute with a burst of `rate`, refilled on the emulator's clock."""

    def __init__(self, now: float, rate: int) -> None:
        self.tokens, self.updated = float(rate), now

    def take(self, now: float, rate: int) -> bool:
        per_second = rate / 60
        self.tokens = min(float(rate), self.tokens + max(0.0, now - self.updated) * per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def headers(self, rate: int) -> dict[str, str]:
        per_second = rate / 60
        remaining = int(self.tokens)
        reset = math.ceil((rate - self.tokens) / per_second)
        return {
            "RateLimit": f'"minute";r={remaining};t={reset}',
            "RateLimit-Policy": f'"minute";q={rate};w=60',
        }

    def retry_after(self, rate: int) -> int:
        return max(1, math.ceil((1 - self.tokens) / (rate / 60)))


def _abort_connection(send: Send) -> None:
    """Close the client's socket with no reply at all.

    ASGI has no message for this, so reach the transport through uvicorn's response cycle (the owner
    of the bound `send`); this is why the gate must be the outermost layer.
    """
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("dropping connections needs the gate directly under uvicorn")
    transport.abort()


class Gate:
    """Wraps the app; admin and unknown paths pass straight through."""

    def __init__(self, app: ASGIApp, world: World, spec: Spec, counters: Counters) -> None:
        self.app, self.world, self.spec, self.counters = app, world, spec, counters
        self.buckets: dict[str, TokenBucket] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
        except ApiError as exc:
            self.counters.record(endpoint, str(exc.status))
            await problem(exc)(scope, receive, send)
            return
        lose = faulty and faults.take_lose()
        await self.app(scope, receive, self._sender(endpoint, send, headers, lose))
        if lose:
            self.counters.record(endpoint, "lost")
            _abort_connection(send)
            await asyncio.sleep(0)  # let uvicorn see the disconnect before it looks for a reply

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
        """401 without a bearer key, 403 with the wrong one, 429 past the per-key rate."""
        auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, key = auth.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise ApiError(401, "Send 'Authorization: Bearer <RUNPOD_API_KEY>'.")
        if not hmac.compare_digest(key.strip().encode(), self.world.settings.api_key.encode()):
            raise ApiError(403, "This API key is not valid for the requested resource.")
        rate = self.world.limits.ratePerMinute
        # Buckets are keyed by a digest so the key itself is kept nowhere but the settings.
        bucket_key = hashlib.sha256(key.encode()).hexdigest()
        now = self.world.now()
        bucket = self.buckets.setdefault(bucket_key, TokenBucket(now, rate))
        if not bucket.take(now, rate):
            headers = bucket.headers(rate) | {"Retry-After": str(bucket.retry_after(rate))}
            raise ApiError(429, "rate limit exceeded for the minute window", headers=headers)
        return bucket.headers(rate)

    def _sender(self, endpoint: str, send: Send, headers: dict[str, str], lose: bool) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.counters.record(endpoint, str(message["status"]))
                extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            if not lose:
                await send(message)

        return wrapped
