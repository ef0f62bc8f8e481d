"""One bucket-name rule set: the stack config and the bucket provider accept and refuse the same names."""

from __future__ import annotations

import pydantic
import pytest

from facts.s3 import bucket_name_problem
from providers.s3.bucket import BucketSpec
from stackconfig.config import BucketConfig

GOOD = ["abc", "trainstack-prod-checkpoints", "a.b-c", "x" * 63]
BAD = ["ab", "x" * 64, "Upper", "-lead", "trail-", "a..b", "192.168.1.1"]
BAD += ["xn--punycode", "sthree-x", "b-s3alias"]  # AWS's reserved prefixes and suffixes


@pytest.mark.parametrize("name", GOOD + BAD)
def test_config_and_provider_agree(name: str) -> None:
    expected_ok = name in GOOD
    assert (bucket_name_problem(name) is None) == expected_ok
    try:
        BucketConfig(name=name, region="us-east-1")
        config_ok = True
    except pydantic.ValidationError:
        config_ok = False
    try:
        BucketSpec(bucket_name=name)
        provider_ok = True
    except pydantic.ValidationError:
        provider_ok = False
    assert config_ok == provider_ok == expected_ok


def test_the_message_names_the_bucket_and_the_rule() -> None:
    problem = bucket_name_problem("xn--abc")
    assert problem is not None and "'xn--abc'" in problem and "reserves" in problem
