"""`s3:CheckpointBucket`: a hardened S3 bucket for checkpoints (AWS, a moto server, or any S3 endpoint).

Hardening, all on by default and re-applied on every update: versioning, default encryption (SSE-S3, or
SSE-KMS with `kms_key_id`), a full public access block, a TLS-only bucket policy, and lifecycle rules
(noncurrent versions expire, aged objects move to an archive class, stale multipart uploads abort).
Credentials come from the standard AWS chain; the endpoint from input `endpoint_url`, else env
`AWS_ENDPOINT_URL_S3`, else AWS. Delete refuses a non-empty bucket unless `force_destroy` is true.

Identity: a bucket is its name and region; the endpoint is only how to reach it, so a new endpoint (a VPC
endpoint, an S3-compatible gateway, a local moto on another port) updates the resource in place and never
plans a replace, which would delete the checkpoint bucket. A read whose recorded endpoint no longer answers
reads through the current one (AWS_ENDPOINT_URL_S3); a delete never does (see `delete`).

Ownership: S3 has no idempotency key either, so a `pulumi up` killed between CreateBucket and the state write
leaves a bucket the state does not know, and the next create finds its name taken. Create tags the bucket
`trainstack:owner` = the stack's identity (input `owner`, "<org>/<project>/<stack>") right after creating
it, and a create that finds the bucket already there adopts it only when that tag matches; a bucket without
the tag, or with another stack's, is a stranger's and is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import (
    CreateResult,
    ReadResult,
    UpdateResult,
)

from common import contract
from providers import settings
from providers.common import PROVIDER_KEY
from providers.resource import CheckedProvider, TypedResource
from providers.s3 import client as s3c
from providers.s3.errors import BucketError, s3_errors
from providers.s3.inputs import CheckpointBucketInputs
from providers.s3.models import BucketSpec

__all__ = [
    "BucketError",
    "BucketSpec",
    "CheckpointBucket",
    "CheckpointBucketInputs",
    "CheckpointBucketProvider",
]

_REPLACE = frozenset({"bucket_name", "region"})  # never endpoint_url: see the module docstring


def _same(key: str, old: Any, new: Any) -> bool:
    # endpoint_url unset means "the default": the endpoint recorded in outputs is not a change.
    return (key == "endpoint_url" and new is None) or old == new


class CheckpointBucketProvider(CheckedProvider):
    """Lifecycle of `s3:CheckpointBucket` (boto3; clients built per call, nothing stored on self)."""

    args_model = BucketSpec
    replace_keys = _REPLACE

    def __init__(self, client_factory: Callable[[BucketSpec], Any] | None = None) -> None:
        super().__init__()
        self._client_factory = client_factory  # None in real use; tests may inject

    def _s3(self, args: BucketSpec) -> Any:
        return (self._client_factory or s3c.make_client)(args)

    def same(self, key: str, old: Any, new: Any) -> bool:
        return _same(key, old, new)

    @s3_errors("create")
    def create(self, props: dict[str, Any]) -> CreateResult:
        from botocore.exceptions import ClientError

        args = BucketSpec.model_validate({k: v for k, v in props.items() if k in BucketSpec.model_fields})
        s3 = self._s3(args)
        if s3c.exists(s3, args.bucket_name):
            return self._adopt(s3, props, args)
        where = (
            {}
            if args.region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": args.region}}
        )
        s3.create_bucket(Bucket=args.bucket_name, **where)
        try:
            if args.owner:  # first, so that a kill from here on leaves a bucket the next create adopts
                s3c.tag_owner(s3, args.bucket_name, args.owner)
            s3c.apply_hardening(s3, args)
        except ClientError:
            s3.delete_bucket(Bucket=args.bucket_name)  # transactional: no half-hardened bucket left
            raise
        return CreateResult(args.bucket_name, self._outs(props, args))

    def _adopt(self, s3: Any, props: dict[str, Any], args: BucketSpec) -> CreateResult:
        """The bucket exists: adopt it when this stack created it (owner tag), else refuse."""
        found = s3c.owner_tag(s3, args.bucket_name)
        if not args.owner or found != args.owner:
            whose = f"it is tagged {s3c.OWNER_TAG}={found!r}" if found else f"it has no {s3c.OWNER_TAG} tag"
            raise BucketError(
                f"bucket {args.bucket_name!r} already exists and is not this stack's ({whose}; this stack "
                f"is {args.owner!r}), so it is left alone; choose another bucket_name"
            )
        s3c.apply_hardening(s3, args)  # ours, from a create cut short: finish what that create began
        return CreateResult(args.bucket_name, self._outs(props, args))

    @s3_errors("read")
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from botocore.exceptions import EndpointConnectionError

        args = BucketSpec.model_validate({k: v for k, v in props.items() if k in BucketSpec.model_fields})
        try:
            return self._read(id_, props, args)
        except EndpointConnectionError:
            # The endpoint recorded at the last update is gone (a restarted local demo, a retired gateway).
            # The bucket is its name and region: read it where S3 is reached now, if that is elsewhere.
            current = settings.current().s3_endpoint_url
            if current == args.endpoint_url:
                raise
            return self._read(id_, props, args.model_copy(update={"endpoint_url": current}))

    def _read(self, id_: str, props: dict[str, Any], args: BucketSpec) -> ReadResult:
        s3 = self._s3(args)
        if not s3c.exists(s3, id_):
            return ReadResult(None, {})
        return ReadResult(id_, self._outs({**props, **s3c.live_settings(s3, id_)}, args))

    @s3_errors("update")
    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = BucketSpec.model_validate({k: v for k, v in news.items() if k in BucketSpec.model_fields})
        s3 = self._s3(args)
        s3c.apply_hardening(s3, args)
        if args.owner and s3c.owner_tag(s3, args.bucket_name) != args.owner:
            s3c.tag_owner(s3, args.bucket_name, args.owner)  # buckets created before the tag existed
        return UpdateResult(self._outs(news, args))

    @s3_errors("delete")
    def delete(self, id_: str, props: dict[str, Any]) -> None:
        from botocore.exceptions import ClientError, EndpointConnectionError

        args = BucketSpec.model_validate({k: v for k, v in props.items() if k in BucketSpec.model_fields})
        s3 = self._s3(args)
        try:
            exists = s3c.exists(s3, id_)
        except EndpointConnectionError:
            # Never retried through today's endpoint: after a replace planned by an older version, the bucket
            # of the same name there is the live one, and this delete would destroy it.
            where = s3c.endpoint_for(args)
            raise BucketError(
                f"cannot delete the checkpoint bucket: the S3 endpoint does not answer at {where} (bucket "
                f"{id_!r}). If that endpoint is gone for good (a local demo restarted elsewhere), run "
                "`scripts/recover <stack>`: the state then forgets this pending deletion. Otherwise bring "
                "the endpoint back and run again"
            ) from None
        if not exists:
            return

        if args.force_destroy:
            s3c.empty(s3, id_)
        elif s3c.has_objects(s3, id_):
            raise BucketError(
                f"bucket {id_!r} still holds checkpoints (objects or old versions); nothing was deleted. "
                "Copy out what you need, then `pulumi config set --path trainstack:bucket.force_destroy "
                "true` and `pulumi up` so the state records it (in the middle of a destroy, `pulumi up "
                "--target` this bucket's URN), and run this again to delete it with every version"
            )
        try:
            s3.delete_bucket(Bucket=id_)
        except ClientError as exc:
            if s3c.error_code(exc) != "NoSuchBucket":
                raise

    def _outs(self, props: Mapping[str, Any], args: BucketSpec) -> dict[str, Any]:
        kept = {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in self.output_keys}
        endpoint = s3c.endpoint_for(args) or f"https://s3.{args.region}.amazonaws.com"
        # `endpoint_url` in outputs is the endpoint actually used (docs/ARCHITECTURE.md).
        return self.outputs(kept, arn=f"arn:aws:s3:::{args.bucket_name}", endpoint_url=endpoint)


class CheckpointBucket(TypedResource, module=contract.BUCKET.module, name=contract.BUCKET.name):
    """A hardened checkpoint bucket (`pulumi-python:dynamic/s3:CheckpointBucket`); see its Inputs."""

    provider_factory = CheckpointBucketProvider

    arn: pulumi.Output[str]
    endpoint_url: pulumi.Output[str]
