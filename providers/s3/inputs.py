"""Typed inputs of `s3:CheckpointBucket`, as components build them; `None` leaves a field to the provider's
default (providers/s3/models.py validates the values and holds every default)."""

from __future__ import annotations

from dataclasses import dataclass

from providers.resource import ResourceInputs


@dataclass(frozen=True, kw_only=True)
class LifecycleInputs(ResourceInputs):
    noncurrent_expire_days: int | None = None
    archive_after_days: int | None = None
    archive_storage_class: str | None = None
    abort_multipart_days: int | None = None
    prefix: str | None = None


@dataclass(frozen=True, kw_only=True)
class CheckpointBucketInputs(ResourceInputs):
    bucket_name: str
    region: str | None = None
    kms_key_id: str | None = None  # SSE-KMS with this key; SSE-S3 when unset
    versioning: bool | None = None
    encryption: bool | None = None
    block_public_access: bool | None = None
    tls_only: bool | None = None
    lifecycle: LifecycleInputs | None = None
    endpoint_url: str | None = None
    force_destroy: bool | None = None
    owner: str | None = None  # the stack's identity, tagged at create; adoption needs a match
