"""Toolchain check program: one dynamic resource whose value comes from stack config."""

import pulumi
from thing import Thing

thing = Thing("one", pulumi.Config().get("value") or "hello")
pulumi.export("value", thing.value)
