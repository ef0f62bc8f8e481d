"""Validated inputs of `s3:CheckpointBucket` (property names of docs/ARCHITECTURE.md); defaults live here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from facts.s3 import bucket_name_problem
from providers.common import InputModel

ArchiveClass = Literal[
    "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"
]


class LifecycleSpec(InputModel):
    """Lifecycle rules for checkpoints."""

    noncurrent_expire_days: int = Field(default=30, ge=1)  # old checkpoint versions kept this long
    archive_after_days: int = Field(default=30, ge=1)  # checkpoints older than this move to archive
    archive_storage_class: ArchiveClass = "GLACIER_IR"  # instant retrieval: resumable without restore
    abort_multipart_days: int = Field(default=7, ge=1)  # half-written uploads from killed nodes
    prefix: str = ""  # limit the rules to a key prefix; "" = the whole bucket


class BucketSpec(InputModel):
    """Inputs of `s3:CheckpointBucket`."""

    bucket_name: str
    region: str = "us-east-1"
    kms_key_id: str | None = None  # SSE-KMS with this key; SSE-S3 when unset
    versioning: bool = True
    encryption: bool = True
    block_public_access: bool = True
    tls_only: bool = True
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec)
    endpoint_url: str | None = None  # moto or another S3 endpoint; else AWS_ENDPOINT_URL_S3 / AWS
    force_destroy: bool = False  # delete even with objects in it (every version is lost)
    owner: str | None = None  # the stack's identity, tagged on the bucket at create; adoption needs a match

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
