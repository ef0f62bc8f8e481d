"""Toolchain check program: `gate:parties` Gate resources that can only be created all at once."""

import pulumi

from tests.toolchain.gate import Gate

config = pulumi.Config("gate")
parties = int(config.require("parties"))
timeout_s = float(config.get("timeout_s") or 120)
for i in range(parties):
    Gate(f"g{i}", {"index": i, "parties": parties, "timeout_s": timeout_s})
