"""moto's S3 server as the tests and the local demo run it: a socket timeout, and bucket policies whose
`aws:SecureTransport` condition is evaluated against the request, as AWS does.

    python -m localcloud.moto_server SOCKET_TIMEOUT_S [moto_server's arguments: -H HOST -p PORT -s -c CRT
        -k KEY]

Why the policy part: the checkpoint bucket carries a `DenyInsecureTransport` statement (Deny s3:* when
`aws:SecureTransport` is "false"; providers/s3/client.py). moto 5.x does not evaluate a `Bool` condition
(moto/iam/policy_conditions.py knows only StringEquals and treats any other operator as matched), so it
applied that Deny to every object request, over HTTPS too: nothing could write a checkpoint. Here a bucket
statement with a condition is kept only when its condition holds for the request (`aws:SecureTransport` is
"true" exactly when the request came over TLS), and moto's own matching does the rest. So the policy stays
as strict as on AWS: a plain-HTTP request is still refused (tests/localcloud/test_moto_server.py shows both).

Why the timeout: over TLS werkzeug's server wraps its listening socket, so each TLS handshake runs inside
accept() on the one thread that accepts: a client that connects and then vanishes (an emulated host whose
namespace is deleted mid-handshake) held that accept forever, and the whole server answered nothing again.
With the timeout the handshake fails, that connection is dropped and the server goes on; an open request's
socket waits at most as long between two reads.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

SECURE_TRANSPORT = "aws:SecureTransport"


def _holds(condition: dict[str, Any], context: dict[str, str]) -> bool:
    """Whether a statement's Condition block holds for `context`; only the operators a bucket policy of
    ours uses are read (Bool, StringEquals); a key absent from the context does not match (AWS's rule)."""
    for operator, pairs in condition.items():
        if operator not in ("Bool", "StringEquals") or not isinstance(pairs, dict):
            return True  # not ours to judge: moto's own evaluation applies
        for key, expected in pairs.items():
            allowed = [str(v).lower() for v in (expected if isinstance(expected, list) else [expected])]
            if str(context.get(key, "")).lower() not in allowed:
                return False
    return True


def applicable_policy(policy: str, context: dict[str, str]) -> str:
    """The policy with only the statements whose conditions hold for the request (conditions dropped)."""
    doc = json.loads(policy)
    statements = doc.get("Statement")
    statements = statements if isinstance(statements, list) else [statements]
    kept = []
    for statement in statements:
        condition = statement.get("Condition")
        if isinstance(condition, dict) and any(op in ("Bool", "StringEquals") for op in condition):
            if not _holds(condition, context):
                continue
            statement = {k: v for k, v in statement.items() if k != "Condition"}
        kept.append(statement)
    return json.dumps({**doc, "Statement": kept})


def install() -> None:
    """Evaluate bucket policy conditions per request in this process's moto (the server's flask app), and
    make its object writes atomic (`atomic_puts`)."""
    import flask
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3.models import FakeBucket

    atomic_puts()

    def get_permission(self: FakeBucket, action: str, resource: str) -> Any:
        if self.policy is None:
            return PermissionResult.NEUTRAL
        secure = flask.has_request_context() and flask.request.is_secure
        context = {SECURE_TRANSPORT: "true" if secure else "false"}
        return IAMPolicy(applicable_policy(self.policy.decode(), context)).is_action_permitted(
            action, resource
        )

    FakeBucket.get_permission = get_permission  # type: ignore[method-assign]


def atomic_puts() -> None:
    """One PutObject at a time in this server, so a conditional write is atomic, as S3's are.

    moto 5.x checks If-None-Match / If-Match and then stores the object as two steps, and its server answers
    each request on a thread of its own: two writers that both sent `If-None-Match: *` could both be told
    200 (seen in CI: both of two supervisors took the lease, supervisor/store.py). S3 answers one 200 and
    the other 412 (or 409 for a write in flight). The lock covers only moto's handling of a request whose
    body it has already read, so uploads are still received side by side."""
    import threading

    from moto.s3.responses import S3Response

    lock = threading.Lock()
    unlocked = S3Response.put_object

    def put_object(self: S3Response) -> Any:
        with lock:
            return unlocked(self)

    S3Response.put_object = put_object  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    socket.setdefaulttimeout(float(argv[0]))
    from common.imports import collector_paused

    # moto, Flask and the two services the suite asks for (S3, KMS; otherwise imported at their first
    # request) with the collector paused (common/imports.py): 0.80 -> 0.58 CPU-s a server, paired.
    with collector_paused():
        install()
        import moto.kms.urls
        import moto.s3.urls  # noqa: F401
        from moto.server import main as moto_main

    moto_main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
