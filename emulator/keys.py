"""API key kinds as RunPod has them: All, Restricted (per API: none, read, read/write) and Read Only.

RunPod's "Manage API keys" page (https://docs.runpod.io/get-started/api-keys, now served at
https://docs.runpod.io/get-started/credentials) gives a key one of three permission levels: **All**
(read and write on every API), **Restricted** (each API set to no access, read only or read/write) and
**Read Only**. Its REST v2 migration guide (https://docs.runpod.io/api-reference-v2/migrate-from-v1)
and the v2 spec's `ForbiddenError` say what a valid key without the right gets: **403** in the problem
format ("The bearer token is valid, but it does not grant access to the requested resource or action").
A missing or unknown key stays 401 (admission.py).

RunPod's console names the APIs a Restricted key is set for; the local RunPod keys them by the first
segment of the REST v2 path (`pods`, `clusters`, `network-volumes`, `billing`, `catalog`, `registries`,
`account`, ...) and `graphql`, so a test can grant "pods: read, billing: read" and see every other API
refused. A read is GET or HEAD, and on `/graphql` a query; a write is any other method, or a GraphQL
mutation (graphql_api.py).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Literal

# The local RunPod's full-access key when none is given (emulator/config.py re-exports it).
DEFAULT_API_KEY = "local-runpod-key"

Access = Literal["none", "read", "read_write"]
Kind = Literal["all", "restricted", "read_only"]
READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Grant:
    """What one presented key may do: its kind and, for a Restricted key, the access per API."""

    kind: Kind
    apis: tuple[tuple[str, Access], ...] = ()

    def access(self, api: str) -> Access:
        if self.kind == "all":
            return "read_write"
        if self.kind == "read_only":
            return "read"
        return dict(self.apis).get(api, "none")


def api_of(path: str) -> str:
    """The API a path belongs to: `graphql`, or the first segment after `/v2/` (`pods`, `billing`, ...)."""
    if path == "/graphql":
        return "graphql"
    return path.removeprefix("/v2/").split("/", 1)[0]


def refusal(grant: Grant, method: str, path: str) -> str | None:
    """Why this request is refused (the 403 detail), or None when the key allows it.

    A GraphQL POST is let through with read access: the endpoint itself refuses a mutation then (a query is
    a read), which `read_only_graphql` tells it.
    """
    api = api_of(path)
    access = grant.access(api)
    if access == "none":
        return f"access denied: this API key has no access to the {api} API."
    write = method not in READS and api != "graphql"
    if write and access == "read":
        which = "read-only" if grant.kind == "read_only" else f"restricted to reading the {api} API"
        return f"access denied: this API key is {which}."
    return None


def read_only_graphql(grant: Grant) -> bool:
    """True when the key may query GraphQL but not mutate it."""
    return grant.access("graphql") == "read"


def grant_for(
    key: str, full_key: str, read_only_key: str, restricted: dict[str, dict[str, Access]]
) -> Grant | None:
    """The grant of a presented key, or None for an unknown one (401). Compared in constant time."""
    if hmac.compare_digest(key.encode(), full_key.encode()):
        return Grant("all")
    if hmac.compare_digest(key.encode(), read_only_key.encode()):
        return Grant("read_only")
    for known, apis in restricted.items():
        if hmac.compare_digest(key.encode(), known.encode()):
            return Grant("restricted", tuple(sorted(apis.items())))
    return None
