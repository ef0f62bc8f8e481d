"""The S3 calls a checkpoint bucket needs, on a boto3 client built per call (`make_client`).

botocore (~40 ms to import) and boto3 (~0.2 s) are imported where an S3 call is made, not when the Pulumi
program imports the resource to declare a bucket. Raw S3 request and response dicts live only here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from providers import settings
from providers.s3.errors import BucketError
from providers.s3.models import BucketSpec, LifecycleSpec

if TYPE_CHECKING:
    from botocore.exceptions import ClientError


def endpoint_for(args: BucketSpec) -> str | None:
    return args.endpoint_url or settings.current().s3_endpoint_url


def make_client(args: BucketSpec) -> Any:
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


def lifecycle_rules(lc: LifecycleSpec) -> list[dict[str, Any]]:
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


def encryption_rule(args: BucketSpec) -> dict[str, Any]:
    if args.kms_key_id:
        default = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": args.kms_key_id}
        return {"ApplyServerSideEncryptionByDefault": default, "BucketKeyEnabled": True}
    return {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}


def apply_hardening(s3: Any, args: BucketSpec) -> None:
    """Put every setting; each call is idempotent, so updates simply re-apply all of them."""
    name = args.bucket_name
    status = "Enabled" if args.versioning else "Suspended"  # S3 cannot return to "never versioned"
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": status})
    if args.encryption:
        s3.put_bucket_encryption(
            Bucket=name, ServerSideEncryptionConfiguration={"Rules": [encryption_rule(args)]}
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


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


OWNER_TAG = "trainstack:owner"


def _tag_set(s3: Any, name: str) -> list[dict[str, str]]:
    from botocore.exceptions import ClientError

    try:
        return list(s3.get_bucket_tagging(Bucket=name).get("TagSet", []))
    except ClientError as exc:
        if error_code(exc) == "NoSuchTagSet":  # S3's answer for a bucket with no tags
            return []
        raise


def owner_tag(s3: Any, name: str) -> str | None:
    """The bucket's `trainstack:owner` tag, or None when it has none."""
    return next((str(t["Value"]) for t in _tag_set(s3, name) if t.get("Key") == OWNER_TAG), None)


def tag_owner(s3: Any, name: str, owner: str) -> None:
    """Add or set the owner tag, keeping every other tag (PutBucketTagging replaces the whole set)."""
    kept = [t for t in _tag_set(s3, name) if t.get("Key") != OWNER_TAG]
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [*kept, {"Key": OWNER_TAG, "Value": owner}]})


def exists(s3: Any, name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=name)
    except ClientError as exc:
        if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise
    return True


def has_objects(s3: Any, name: str) -> bool:
    page = s3.list_object_versions(Bucket=name, MaxKeys=1)
    return bool(page.get("Versions") or page.get("DeleteMarkers"))


def empty(s3: Any, name: str) -> None:
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


def live_settings(s3: Any, name: str) -> dict[str, Any]:
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
