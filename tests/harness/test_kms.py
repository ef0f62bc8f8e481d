"""Issue #62: the tests' KMS key is made again when the moto it lived in lost it (a restart keeps nothing)."""

from __future__ import annotations

import boto3
import pytest

from harness import kms

pytestmark = pytest.mark.services


def test_the_key_is_made_again_after_moto_lost_it(moto_s3: str) -> None:
    client = boto3.client("kms", endpoint_url=moto_s3, region_name=kms.REGION)
    kms.secrets_provider(moto_s3)
    # What a restart of moto on the same endpoint leaves: no alias (moto keeps nothing across a restart;
    # the session's other stacks keep their key, whose id their states hold, so only the alias goes).
    client.delete_alias(AliasName=kms.ALIAS)
    url = kms.secrets_provider(moto_s3)
    assert url.startswith(f"awskms://{kms.ALIAS}?")
    assert client.describe_key(KeyId=kms.ALIAS)["KeyMetadata"]["Enabled"]
