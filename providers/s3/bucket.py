"""`s3:CheckpointBucket`: a hardened S3 bucket for checkpoints (AWS, a moto server, or any S3 endpoint).

Hardening, all on by default and re-applied on every update: versioning, default encryption (SSE-S3, or
SSE-KMS with `kms_key_id`), a full public access block, a TLS-only bucket policy, and lifecycle rules
(noncurrent versions expire, aged objects move to an archive class, stale multipart uploads abort).
Credentials come from the standard AWS chain; the endpoint from input `endpoint_url`, else env
`AWS_ENDPOINT_URL_S3`, else AWS. Delete refuses a non-empty bucket unless `force_destroy` is true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from providers.common import PROVIDER_KEY, contains_unknown, validate_inputs
from providers.s3 import client as s3c
from providers.s3.errors import BucketError, s3_errors
from providers.s3.models import BucketArgs

__all__ = ["BucketArgs", "BucketError", "CheckpointBucket", "CheckpointBucketProvider"]

_OUTPUTS = frozenset({"arn"})
_REPLACE = frozenset({"bucket_name", "region", "endpoint_url"})


def _same(key: str, old: Any, new: Any) -> bool:
    # endpoint_url unset means "the default": the endpoint recorded in outputs is not a change.
    return (key == "endpoint_url" and new is None) or old == new


class CheckpointBucketProvider(ResourceProvider):
    """Lifecycle of `s3:CheckpointBucket` (boto3; clients built per call, nothing stored on self)."""

    def __init__(self, client_factory: Callable[[BucketArgs], Any] | None = None) -> None:
        super().__init__()
        self._client_factory = client_factory  # None in real use; tests may inject

    def _s3(self, args: BucketArgs) -> Any:
        return (self._client_factory or s3c.make_client)(args)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        _model, values, failures = validate_inputs(BucketArgs, news, _OUTPUTS | {PROVIDER_KEY})
        return CheckResult(values, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = (set(olds) | set(news)) - _OUTPUTS - {PROVIDER_KEY}
        changed = {k for k in keys if contains_unknown(news.get(k)) or not _same(k, olds.get(k), news.get(k))}
        replaces = sorted(changed & _REPLACE)
        return DiffResult(changes=bool(changed), replaces=replaces)

    @s3_errors("create")
    def create(self, props: dict[str, Any]) -> CreateResult:
        from botocore.exceptions import ClientError

        args = BucketArgs.model_validate({k: v for k, v in props.items() if k in BucketArgs.model_fields})
        s3 = self._s3(args)
        if s3c.exists(s3, args.bucket_name):
            raise BucketError(
                f"bucket {args.bucket_name!r} already exists; choose another bucket_name "
                "(dynamic resources cannot be imported)"
            )
        where = (
            {}
            if args.region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": args.region}}
        )
        s3.create_bucket(Bucket=args.bucket_name, **where)
        try:
            s3c.apply_hardening(s3, args)
        except ClientError:
            s3.delete_bucket(Bucket=args.bucket_name)  # transactional: no half-hardened bucket left
            raise
        return CreateResult(args.bucket_name, self._outs(props, args))

    @s3_errors("read")
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        args = BucketArgs.model_validate({k: v for k, v in props.items() if k in BucketArgs.model_fields})
        s3 = self._s3(args)
        if not s3c.exists(s3, id_):
            return ReadResult(None, {})
        return ReadResult(id_, self._outs({**props, **s3c.live_settings(s3, id_)}, args))

    @s3_errors("update")
    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = BucketArgs.model_validate({k: v for k, v in news.items() if k in BucketArgs.model_fields})
        s3c.apply_hardening(self._s3(args), args)
        return UpdateResult(self._outs(news, args))

    @s3_errors("delete")
    def delete(self, id_: str, props: dict[str, Any]) -> None:
        args = BucketArgs.model_validate({k: v for k, v in props.items() if k in BucketArgs.model_fields})
        s3 = self._s3(args)
        if not s3c.exists(s3, id_):
            return
        from botocore.exceptions import ClientError

        if args.force_destroy:
            s3c.empty(s3, id_)
        elif s3c.has_objects(s3, id_):
            raise BucketError(
                f"bucket {id_!r} still holds checkpoints (objects or old versions); nothing was deleted. "
                "Copy out what you need, then set force_destroy: true and run again to delete it with "
                "every version"
            )
        try:
            s3.delete_bucket(Bucket=id_)
        except ClientError as exc:
            if s3c.error_code(exc) != "NoSuchBucket":
                raise

    def _outs(self, props: Mapping[str, Any], args: BucketArgs) -> dict[str, Any]:
        kept = {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in _OUTPUTS}
        endpoint = s3c.endpoint_for(args) or f"https://s3.{args.region}.amazonaws.com"
        # `endpoint_url` in outputs is the endpoint actually used (docs/ARCHITECTURE.md).
        return {**kept, "arn": f"arn:aws:s3:::{args.bucket_name}", "endpoint_url": endpoint}


class CheckpointBucket(Resource, module="s3", name="CheckpointBucket"):
    """A hardened checkpoint bucket (`pulumi-python:dynamic/s3:CheckpointBucket`); see BucketArgs."""

    arn: pulumi.Output[str]
    endpoint_url: pulumi.Output[str]

    def __init__(
        self, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(CheckpointBucketProvider(), name, {"arn": None, "endpoint_url": None, **props}, opts)
