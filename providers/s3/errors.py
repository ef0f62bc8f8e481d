"""Errors of the S3 provider: every S3 failure becomes a `BucketError` that says what to do next."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from providers.errors import TrainstackError


class BucketError(TrainstackError):
    """A checkpoint bucket operation we refuse or cannot complete; the message says what to do."""


_F = TypeVar("_F", bound=Callable[..., Any])
_WRITES = frozenset({"create", "update", "delete"})
# The RunPod side says the same (providers/runpod/errors.py); docs/PREVIEW-REPORT.md, "Keys".
PREVIEW_NEVER_WRITES = (
    "a preview never writes: its AWS keys (ops/iam/preview-policy.json) only read; deploy with "
    "`scripts/up` or the deploy workflow, which hold the stack's write keys in its protected environment"
)


def s3_errors(verb: str) -> Callable[[_F], _F]:
    """Turn S3 failures into a BucketError naming the operation, the endpoint problem or the error code.

    Only the code and operation are kept: S3 error messages and bodies can carry request details.
    """

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

            from providers import settings

            if verb in _WRITES and settings.current().read_only:
                raise BucketError(
                    f"cannot {verb} the checkpoint bucket: {PREVIEW_NEVER_WRITES} (TRAINSTACK_READ_ONLY=1)"
                )
            try:
                return fn(*args, **kwargs)
            except EndpointConnectionError:
                raise BucketError(
                    f"cannot {verb} the checkpoint bucket: the S3 endpoint does not answer; check "
                    "AWS_ENDPOINT_URL_S3 / trainstack:s3EndpointUrl (local demo: scripts/local-runpod start)"
                ) from None
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "unknown")
                op = getattr(err, "operation_name", "S3")
                if code == "NoSuchBucket" and verb != "create":
                    # The S3 server lost it (the local demo's moto restarted) or someone deleted it.
                    raise BucketError(
                        f"cannot {verb} the checkpoint bucket: S3 answered {op} with NoSuchBucket (the "
                        "bucket is gone); refresh the stack (scripts/recover STACK runs `pulumi refresh`), "
                        "which drops it from the state, then run the command again"
                    ) from None
                if code == "AccessDenied" and verb in _WRITES:
                    raise BucketError(
                        f"cannot {verb} the checkpoint bucket: S3 refused {op} with AccessDenied; if these "
                        f"are the preview's keys, {PREVIEW_NEVER_WRITES}"
                    ) from None
                raise BucketError(
                    f"cannot {verb} the checkpoint bucket: S3 refused {op} with {code}; check the AWS "
                    "credentials and the bucket's permissions"
                ) from None
            except BotoCoreError as err:
                raise BucketError(f"cannot {verb} the checkpoint bucket: {type(err).__name__}") from None

        return wrapper  # type: ignore[return-value]

    return decorate
