"""Start the dynamic-provider process while the program is still importing, and let it import ahead.

Pulumi starts the provider process for dynamic resources when the program registers its first one, and
the Python SDK sends registrations only after the program's top-level code has returned. So by default a
preview runs three things one after another: the program's imports and component code, the provider
process's own start (Python, pulumi, grpc: ~0.3 s), and the provider's first check, which unpickles the
provider class and so imports its module, pydantic and our input models (~0.1 s).

`request_preload()` overlaps them. Called first thing in the program, it sends one Invoke of
PRELOAD_FUNCTION to the engine from a background thread. To answer it the engine starts the default
`pulumi-python` provider right away, on the machine's other core, while the program goes on importing.
trainstack's provider host (tools/pulumi/dynhost) answers the Invoke by importing the listed modules on a
thread of its own, so the first check finds them loaded. Pulumi's stock host answers "not implemented";
the engine has still started the provider early, and the program ignores the answer. Nothing is registered
and no state changes: the default provider is the same one the first resource would have started.

Standard library and pulumi only: importing this module must not cost what it is meant to hide.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Sequence

# The same string is in tools/pulumi/dynhost/trainstack_dynamic_host.py (a test keeps them equal).
PRELOAD_FUNCTION = "pulumi-python:dynamic:trainstackPreload"
MODULES_ARG = "modules"

# The modules whose provider classes the trainstack program pickles into its dynamic resources, roughly in
# the order H100Cluster registers them. A test checks the list against components/.
PROVIDER_MODULES: tuple[str, ...] = (
    "providers.runpod.volume",
    "providers.s3.bucket",
    "providers.runpod.registry",
    "providers.runpod.cluster",
    "providers.runpod.pod",
    # Imports providers.runpod.secret too: an older state's runpod:Secret unpickles its provider from there.
    "providers.delivery.secrets_file",
    "providers.delivery.node_files",
)

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def request_preload(modules: Sequence[str] = PROVIDER_MODULES) -> threading.Thread | None:
    """Ask the engine, without waiting, to start the dynamic provider and import `modules` in it.

    Returns the thread that waits for the answer, or None when there is no engine to ask (unit tests
    with Pulumi mocks, or code run outside `pulumi`). Never raises for the engine's answer: a failure
    here only means the provider starts at the first registration, as it would have anyway."""
    bad = [m for m in modules if not _MODULE_NAME.fullmatch(m)]
    if bad:
        raise ValueError(f"request_preload: not module names: {bad}; give dotted names like 'pkg.mod'")
    import grpc
    from pulumi.runtime import settings
    from pulumi.runtime.proto import resource_pb2, resource_pb2_grpc

    monitor = settings.get_monitor()
    if not isinstance(monitor, resource_pb2_grpc.ResourceMonitorStub):
        return None  # mocks or no engine: nothing to start
    request = resource_pb2.ResourceInvokeRequest(tok=PRELOAD_FUNCTION)
    request.args.get_or_create_list(MODULES_ARG).extend(list(modules))

    def ask() -> None:
        # An early start is an optimisation: a real problem shows at the first registration. ValueError:
        # the channel closed as the program ended.
        with contextlib.suppress(grpc.RpcError, ValueError):
            monitor.Invoke(request)

    thread = threading.Thread(target=ask, name="trainstack-preload", daemon=True)
    thread.start()
    return thread
