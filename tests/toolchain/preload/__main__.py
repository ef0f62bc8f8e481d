"""Toolchain check program: asks the provider host to preload a module, then registers one resource."""

from providers.preload import request_preload
from tests.toolchain.probe import Probe

asked = request_preload(["tests.toolchain.preload_probe"])
assert asked is not None, "request_preload found no engine to ask"
asked.join()  # the host has answered, so its preload runs before any check (deterministic for the test)
Probe("probe")
