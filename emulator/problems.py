"""RFC 9457 problem responses (`application/problem+json`), the v2 error shape."""

from __future__ import annotations

from http import HTTPStatus

from starlette.responses import JSONResponse

PROBLEM_JSON = "application/problem+json"
# RunPod's capacity refusal has no machine-readable code, only this text (RunPod REST v2 docs, errors of `POST
# /v2/pods`).
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)


class ApiError(Exception):
    """A request the emulator refuses; turned into a problem response at the edge."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: list[str] | None = None,
        title: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.title = title or HTTPStatus(status).phrase
        self.headers = headers or {}


def problem_body(
    status: int, detail: str, *, title: str | None = None, errors: list[str] | None = None
) -> dict[str, object]:
    body: dict[str, object] = {
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return body


def problem(error: ApiError) -> JSONResponse:
    body = problem_body(error.status, error.detail, title=error.title, errors=error.errors)
    return JSONResponse(body, status_code=error.status, media_type=PROBLEM_JSON, headers=error.headers)


def not_found(kind: str, ident: str) -> ApiError:
    return ApiError(404, f"{kind} {ident!r} was not found")
