"""`s3:CheckpointBucket`: a hardened S3 bucket for checkpoints (AWS, a moto server, or any S3 endpoint).

Hardening, all on by default and re-applied on every update: versioning, default encryption (SSE-S3, or
SSE-KMS with `kms_key_id`), a full public access block, a TLS-only bucket policy, and lifecycle rules
(noncurrent versions expire, aged objects move to an archive class, stale multipart uploads abort).
Credentials come from the standard AWS chain; the endpoint from input `endpoint_url`, else env
`AWS_ENDPOINT_URL_S3`, else AWS. Delete refuses a non-empty bucket unless `force_destroy` is true.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

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
from pydantic import Field, field_validator

from facts.s3 import bucket_name_problem
from providers import display
from providers.common import PROVIDER_KEY, InputModel, contains_unknown, validate_inputs

# botocore (~40 ms to import) is imported where an S3 call is made, not when the Pulumi program imports this
# module to declare a bucket.
if TYPE_CHECKING:
    from botocore.exceptions import ClientError

_OUTPUTS = frozenset({"arn"})
_REPLACE = frozenset({"bucket_name", "region", "endpoint_url"})
ArchiveClass = Literal[
    "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"
]


class LifecycleArgs(InputModel):
    """Lifecycle rules for checkpoints."""

    noncurrent_expire_days: int = Field(default=30, ge=1)  # old checkpoint versions kept this long
    archive_after_days: int = Field(default=30, ge=1)  # checkpoints older than this move to archive
    archive_storage_class: ArchiveClass = "GLACIER_IR"  # instant retrieval: resumable without restore
    abort_multipart_days: int = Field(default=7, ge=1)  # half-written uploads from killed nodes
    prefix: str = ""  # limit the rules to a key prefix; "" = the whole bucket


class BucketArgs(InputModel):
    """Inputs of `s3:CheckpointBucket`."""

    bucket_name: str
    region: str = "us-east-1"
    kms_key_id: str | None = None  # SSE-KMS with this key; SSE-S3 when unset
    versioning: bool = True
    encryption: bool = True
    block_public_access: bool = True
    tls_only: bool = True
    lifecycle: LifecycleArgs = Field(default_factory=LifecycleArgs)
    endpoint_url: str | None = None  # moto or another S3 endpoint; else AWS_ENDPOINT_URL_S3 / AWS
    force_destroy: bool = False  # delete even with objects in it (every version is lost)

    @field_validator("bucket_name")
    @classmethod
    def _name(cls, name: str) -> str:
        problem = bucket_name_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    def rule_failures(self) -> list[tuple[str, str]]:
        if self.kms_key_id and not self.encryption:
            return [("encryption", "kms_key_id is set: keep encryption true (SSE-KMS) or drop kms_key_id")]
        return []


def endpoint_for(args: BucketArgs) -> str | None:
    return args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or None


def make_client(args: BucketArgs) -> Any:
    # boto3 is imported here, not at module level: the program and a no-op preview never call S3, and
    # importing boto3 costs ~0.2 s in each of those processes.
    import boto3
    from botocore.config import Config as BotoConfig

    endpoint = endpoint_for(args)
    # Path-style addressing: custom endpoints (moto, MinIO) rarely serve virtual-host buckets.
    config = BotoConfig(
        connect_timeout=10,
        read_timeout=30,
        retries={"max_attempts": 5, "mode": "standard"},
        s3={"addressing_style": "path" if endpoint else "auto"},
    )
    return boto3.client("s3", region_name=args.region, endpoint_url=endpoint, config=config)


def tls_only_policy(bucket: str) -> str:
    arn = f"arn:aws:s3:::{bucket}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [arn, f"{arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


def lifecycle_rules(lc: LifecycleArgs) -> list[dict[str, Any]]:
    scope = {"Filter": {"Prefix": lc.prefix}, "Status": "Enabled"}
    return [
        {
            "ID": "expire-noncurrent-versions",
            **scope,
            "NoncurrentVersionExpiration": {"NoncurrentDays": lc.noncurrent_expire_days},
        },
        {
            "ID": "archive-aged-checkpoints",
            **scope,
            "Transitions": [{"Days": lc.archive_after_days, "StorageClass": lc.archive_storage_class}],
        },
        {
            "ID": "abort-incomplete-multipart",
            **scope,
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": lc.abort_multipart_days},
        },
    ]


def _encryption_rule(args: BucketArgs) -> dict[str, Any]:
    if args.kms_key_id:
        default = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": args.kms_key_id}
        return {"ApplyServerSideEncryptionByDefault": default, "BucketKeyEnabled": True}
    return {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}


def apply_hardening(s3: Any, args: BucketArgs) -> None:
    """Put every setting; each call is idempotent, so updates simply re-apply all of them."""
    name = args.bucket_name
    status = "Enabled" if args.versioning else "Suspended"  # S3 cannot return to "never versioned"
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": status})
    if args.encryption:
        s3.put_bucket_encryption(
            Bucket=name, ServerSideEncryptionConfiguration={"Rules": [_encryption_rule(args)]}
        )
    else:
        s3.delete_bucket_encryption(Bucket=name)
    flags = dict.fromkeys(
        ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"),
        args.block_public_access,
    )
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=flags)
    if args.tls_only:
        s3.put_bucket_policy(Bucket=name, Policy=tls_only_policy(name))
    else:
        s3.delete_bucket_policy(Bucket=name)
    s3.put_bucket_lifecycle_configuration(
        Bucket=name, LifecycleConfiguration={"Rules": lifecycle_rules(args.lifecycle)}
    )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _exists(s3: Any, name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=name)
    except ClientError as exc:
        if _code(exc) in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise
    return True


class BucketError(Exception):
    """A checkpoint bucket operation we refuse or cannot complete; the message says what to do."""


display.install(BucketError)

_F = TypeVar("_F", bound=Callable[..., Any])


def s3_errors(verb: str) -> Callable[[_F], _F]:
    """Turn S3 failures into a BucketError naming the operation, the endpoint problem or the error code.

    Only the code and operation are kept: S3 error messages and bodies can carry request details.
    """

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

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
                raise BucketError(
                    f"cannot {verb} the checkpoint bucket: S3 refused {op} with {code}; check the AWS "
                    "credentials and the bucket's permissions"
                ) from None
            except BotoCoreError as err:
                raise BucketError(f"cannot {verb} the checkpoint bucket: {type(err).__name__}") from None

        return wrapper  # type: ignore[return-value]

    return decorate


def _has_objects(s3: Any, name: str) -> bool:
    page = s3.list_object_versions(Bucket=name, MaxKeys=1)
    return bool(page.get("Versions") or page.get("DeleteMarkers"))


def _empty(s3: Any, name: str) -> None:
    """Delete every object version and delete marker, and abort open multipart uploads."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = {"Objects": keys[start : start + 1000], "Quiet": True}
            failed = s3.delete_objects(Bucket=name, Delete=batch).get("Errors", [])
            if failed:  # per-key failures come back in a 200, not as an exception
                raise BucketError(
                    f"could not delete {len(failed)} object versions from {name!r} "
                    f"(first: {failed[0].get('Code')}); the bucket was kept"
                )
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=name):
        for upload in page.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])


def _live_settings(s3: Any, name: str) -> dict[str, Any]:
    """What the bucket really has, in input terms, for refresh to show drift."""
    from botocore.exceptions import ClientError

    versioning = s3.get_bucket_versioning(Bucket=name).get("Status") == "Enabled"
    try:
        rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
        default = rules[0]["ApplyServerSideEncryptionByDefault"]
        encryption, kms = True, default.get("KMSMasterKeyID")
    except ClientError:
        encryption, kms = False, None
    try:
        block = all(s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"].values())
    except ClientError:
        block = False
    try:
        tls = "aws:SecureTransport" in s3.get_bucket_policy(Bucket=name)["Policy"]
    except ClientError:
        tls = False
    return {
        "versioning": versioning,
        "encryption": encryption,
        "kms_key_id": kms,
        "block_public_access": block,
        "tls_only": tls,
    }


def _same(key: str, old: Any, new: Any) -> bool:
    # endpoint_url unset means "the default": the endpoint recorded in outputs is not a change.
    return (key == "endpoint_url" and new is None) or old == new


class CheckpointBucketProvider(ResourceProvider):
    """Lifecycle of `s3:CheckpointBucket` (boto3; clients built per call, nothing stored on self)."""

    def __init__(self, client_factory: Callable[[BucketArgs], Any] | None = None) -> None:
        super().__init__()
        self._client_factory = client_factory  # None in real use; tests may inject

    def _s3(self, args: BucketArgs) -> Any:
        return (self._client_factory or make_client)(args)

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
        if _exists(s3, args.bucket_name):
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
            apply_hardening(s3, args)
        except ClientError:
            s3.delete_bucket(Bucket=args.bucket_name)  # transactional: no half-hardened bucket left
            raise
        return CreateResult(args.bucket_name, self._outs(props, args))

    @s3_errors("read")
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        args = BucketArgs.model_validate({k: v for k, v in props.items() if k in BucketArgs.model_fields})
        s3 = self._s3(args)
        if not _exists(s3, id_):
            return ReadResult(None, {})
        return ReadResult(id_, self._outs({**props, **_live_settings(s3, id_)}, args))

    @s3_errors("update")
    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = BucketArgs.model_validate({k: v for k, v in news.items() if k in BucketArgs.model_fields})
        apply_hardening(self._s3(args), args)
        return UpdateResult(self._outs(news, args))

    @s3_errors("delete")
    def delete(self, id_: str, props: dict[str, Any]) -> None:
        args = BucketArgs.model_validate({k: v for k, v in props.items() if k in BucketArgs.model_fields})
        s3 = self._s3(args)
        if not _exists(s3, id_):
            return
        from botocore.exceptions import ClientError

        if args.force_destroy:
            _empty(s3, id_)
        elif _has_objects(s3, id_):
            raise BucketError(
                f"bucket {id_!r} still holds checkpoints (objects or old versions); nothing was deleted. "
                "Copy out what you need, then set force_destroy: true and run again to delete it with "
                "every version"
            )
        try:
            s3.delete_bucket(Bucket=id_)
        except ClientError as exc:
            if _code(exc) != "NoSuchBucket":
                raise

    def _outs(self, props: Mapping[str, Any], args: BucketArgs) -> dict[str, Any]:
        kept = {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in _OUTPUTS}
        endpoint = endpoint_for(args) or f"https://s3.{args.region}.amazonaws.com"
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
