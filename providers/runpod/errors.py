"""The exceptions every RunPod call can raise, and how HTTP/GraphQL failures map onto them.

The tree (under `RunPodError`) is drawn with the rest of trainstack's errors in providers/errors.py.
Messages are ours: method, path *template* (`/v2/pods/{id}`), status and what to do next. They never
copy response bodies or headers, which can echo request data, and never contain the API key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from providers.errors import SettingsError, TrainstackError


class RunPodError(TrainstackError):
    """Base class of every error raised by `providers.runpod`."""


class RunPodSettingsError(RunPodError, SettingsError):
    """The provider cannot run: credentials or endpoint are missing or malformed."""


class TransportError(RunPodError):
    """No HTTP response: DNS, connect, read timeout, dropped connection (after retries)."""


class UncertainRequestError(TransportError):
    """A POST was sent and may have taken effect; callers reconcile (list and match) before retrying."""


class DeadlineExceeded(RunPodError):
    """A bounded wait ran out of time."""


class ApiError(RunPodError):
    """RunPod answered with an error status (or a GraphQL `errors` array)."""

    def __init__(self, message: str, *, status: int, method: str, path: str) -> None:
        super().__init__(f"{message} [{method} {path} -> HTTP {status}]")
        self.status = status
        self.method = method
        self.path = path


class AuthError(ApiError):
    """401/403."""


class WriteRefusedError(AuthError):
    """403 on a write: the key is Read Only or Restricted (a preview's key); a preview never writes."""


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})  # a GraphQL query is sent as POST but named QUERY
# What a refused write tells the reader: which key it is, and where writes are made (docs/PREVIEW-REPORT.md).
PREVIEW_NEVER_WRITES = (
    "a preview never writes: its RunPod key is read-only; create and change resources with `scripts/up` or "
    "the deploy workflow, which hold the stack's write key in its protected environment"
)


class PreviewWriteError(RunPodError):
    """TRAINSTACK_READ_ONLY=1 and a write was asked for: refused before anything was sent."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(f"{PREVIEW_NEVER_WRITES} (TRAINSTACK_READ_ONLY=1; not sent) [{method} {path}]")
        self.method = method
        self.path = path


class NotFoundError(ApiError):
    """404."""


class ConflictError(ApiError):
    """409."""


class InvalidRequestError(ApiError):
    """422 or a deterministic 400 rule violation."""


class InsufficientBalanceError(ApiError):
    """402."""


class NoCapacityError(ApiError):
    """400 whose detail says no instances are available."""


class SpotRefusedError(NoCapacityError):
    """Interruptible (spot) capacity was refused or the spot API is gone."""


class SpendLimitError(ApiError):
    """The account spend limit (default $80/h) would be exceeded."""


class RateLimitedError(ApiError):
    """429 until the deadline."""


class GoneError(ApiError):
    """410: RunPod retired this API (GraphQL, early 2027; REST v1, 2026-11). Final: never retried."""


class ServerError(ApiError):
    """5xx until the deadline."""


class GraphQLError(ApiError):
    """A GraphQL `errors` array we could not classify further."""


# Texts RunPod uses where no machine-readable code exists (RunPod's error guidance for `POST /v2/pods` in the
# REST v2 docs: a 400 whose text is the only sign of no capacity; recorded answers in
# tests/providers/runpod/fake_runpod.py). Matched case-insensitively against `detail` / GraphQL `message` only
# to choose the class; the text itself is never copied into our messages.
NO_CAPACITY_MARKERS = ("no longer any instances available", "no instances available")
SPEND_LIMIT_MARKERS = ("spend limit", "spending limit")
BALANCE_MARKERS = ("insufficient balance", "insufficient funds", "not enough credit")
SPOT_REFUSED_MARKERS = ("interruptable", "interruptible", "spot", "bid")

_STATUS_HINTS: dict[int, tuple[type[ApiError], str]] = {
    401: (
        AuthError,
        "RunPod rejected the API key; set RUNPOD_API_KEY or `pulumi config set --secret runpod:apiKey`",
    ),
    403: (AuthError, "the API key has no access to this resource or GPU pool"),
    404: (NotFoundError, "not found on RunPod"),
    402: (InsufficientBalanceError, "insufficient RunPod balance; add credit (on-demand needs >= 1 h)"),
    409: (ConflictError, "not allowed in the resource's current state"),
    422: (InvalidRequestError, "RunPod rejected the request body as invalid; fix the inputs"),
    429: (
        RateLimitedError,
        "rate limited by RunPod until the deadline; lower RUNPOD_RATE_LIMIT_PER_MIN (or _PER_HOUR, _PER_DAY)",
    ),
    410: (
        GoneError,
        "RunPod has retired this API (HTTP 410 Gone); trainstack uses REST v2 for everything it still needs "
        "(docs/RUNPOD-CONTRACT.md)",
    ),
    # Not "gone" and not transient: a DELETE answered 501 must never read as a successful delete.
    501: (ApiError, "RunPod does not implement this operation (HTTP 501); nothing was changed"),
}


def _has(text: str, markers: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(m in low for m in markers)


def _pick(status: int, detail: str, write: bool) -> tuple[type[ApiError], str]:
    if _has(detail, SPEND_LIMIT_MARKERS):
        return SpendLimitError, (
            "the RunPod account spend limit would be exceeded; raise it in the console "
            "(default $80/h) or deploy fewer GPUs"
        )
    if status == 400 and _has(detail, NO_CAPACITY_MARKERS):
        return NoCapacityError, (
            "RunPod has no capacity for this GPU type / data center; try another "
            "data center, GPU type or cloud"
        )
    if status in (400, 403) and _has(detail, BALANCE_MARKERS):
        return _STATUS_HINTS[402]
    if status == 403 and write:
        return WriteRefusedError, f"RunPod refused a write with this API key; {PREVIEW_NEVER_WRITES}"
    if status in _STATUS_HINTS:
        return _STATUS_HINTS[status]
    if status == 400:
        return InvalidRequestError, "RunPod refused the request (a rule violation); fix the inputs"
    if status >= 500:
        return ServerError, "RunPod kept failing with server errors; retry later"
    return ApiError, "unexpected RunPod response"


def classify(
    status: int,
    detail: str,
    *,
    method: str,
    path: str,
    reported_status: int | None = None,
    refused: Sequence[object] = (),
    write: bool | None = None,
) -> ApiError:
    """Build the exception for an error response; `detail` picks the class but is never quoted.

    `reported_status` is the HTTP status to show when it differs from the one used to classify
    (GraphQL errors arrive with HTTP 200). `refused` is `refused_fields` of the body's `errors`: for a
    request RunPod calls invalid, the message names those inputs. `write` (default: the method is one) turns
    a 403 into `WriteRefusedError`, whose message says a preview never writes.
    """
    cls, hint = _pick(status, detail, method in WRITES if write is None else write)
    fields = refused_fields(refused)
    if cls is InvalidRequestError and fields:
        hint = f"{hint.split(';')[0]}: it named {', '.join(fields)}; fix those inputs"
    return cls(hint, status=status if reported_status is None else reported_status, method=method, path=path)


# An entry of a problem's `errors` array: `<JSON path or pointer>: <text>`, e.g. "$.gpu.id: ..." (the
# spec's example is "$: additional properties 'bogus' not allowed"). Only the field names are taken, and
# only when they look like field names: the text itself may echo request values and is never quoted.
_ENTRY = re.compile(r"^\s*(?:\$|/)?(?P<path>[A-Za-z0-9_.\[\]/]*)\s*:(?P<text>.*)$", re.S)
_QUOTED_NAMES = re.compile(r"(?:additional propert(?:y|ies)|unknown field\(s\))\s+(?P<names>'[^:]*')")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}(?:\.[A-Za-z0-9_]{1,40}){0,4}$")
MAX_FIELDS = 5


def refused_fields(entries: Sequence[object]) -> list[str]:
    """Field names (dotted, e.g. `gpu.id`) the `errors` entries of a problem response point at."""
    names: list[str] = []
    for entry in entries:
        match = _ENTRY.match(entry) if isinstance(entry, str) else None
        if match is None:
            continue
        path = match["path"].strip("/.").replace("/", ".").replace("[", ".").replace("]", "")
        quoted = _QUOTED_NAMES.search(match["text"])
        found = [n.strip("' ") for n in quoted["names"].split(",")] if quoted else [""]
        for name in found:
            full = ".".join(p for p in (path, name) if p)
            if _FIELD.match(full) and full not in names:
                names.append(full)
    return names[:MAX_FIELDS]


def graphql_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says RunPod's GraphQL cannot be used now: retired (410), or rate-limited past the
    deadline (429 whose Retry-After outlasts it), as RunPod's migration notes describe both."""
    return isinstance(exc, GoneError | RateLimitedError)


def left_in_console(name: str, secret_id: str, exc: ApiError) -> str:
    """The line a delete that GraphQL refused leaves: what stays at RunPod, and who deletes it."""
    why = "retired it (HTTP 410 Gone)" if isinstance(exc, GoneError) else "rate-limits it past the deadline"
    return (
        f"RunPod secret {name!r} [{secret_id}] dropped from the state without deleting it: RunPod's GraphQL "
        f"{why} and REST v2 has no secrets API. It stays in the RunPod console (Settings > Secrets) until a "
        "person deletes it there; the node's secrets now come over SSH (docs/OPERATING.md, Secrets)"
    )
