"""trainstack's host for Pulumi Python dynamic providers: `pulumi.dynamic` with more RPCs in flight.

The stock host (`python -m pulumi.dynamic`) serves its gRPC API from a pool of 4 threads. Our providers'
create/update calls block while a pod or cluster boots, so with 4 threads a pool of 32 pods boots in waves
of 4. This host runs the very same module, but hands its gRPC server a wider pool: every RPC the engine
sends at once (`pulumi up --parallel`, default unbounded) gets a thread, up to TRAINSTACK_PROVIDER_WORKERS
(default 64). The work each thread does is waiting on RunPod, so threads cost memory (~64 KiB each of
stack touched), not CPU; the client's token bucket keeps the request rate under RunPod's quota whatever
the width.

Installed by scripts/bootstrap next to the CLI, with `pulumi-resource-pulumi-python` that starts it.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from concurrent import futures
from typing import Any

DEFAULT_WORKERS = 64
MAX_WORKERS = 1024
ENV = "TRAINSTACK_PROVIDER_WORKERS"


def workers_from_env(environ: dict[str, str] | os._Environ[str]) -> int:
    raw = environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_WORKERS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WORKERS:
        raise SystemExit(
            f"{ENV}={raw!r}: expected a whole number of threads from 1 to {MAX_WORKERS} "
            f"(unset it for the default, {DEFAULT_WORKERS})"
        )
    return value


def widen(grpc_module: Any, workers: int) -> Callable[..., Any]:
    """Make the next `grpc.server(pool, ...)` call use a pool of `workers` threads instead of `pool`."""
    real_server: Callable[..., Any] = grpc_module.server

    def server(thread_pool: futures.ThreadPoolExecutor, *args: Any, **kwargs: Any) -> Any:
        grpc_module.server = real_server  # only the host's own server; leave grpc as it was
        thread_pool.shutdown(wait=False)
        wide = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynamic-provider")
        return real_server(wide, *args, **kwargs)

    grpc_module.server = server
    return server


def main() -> None:
    # pydantic would scan every installed package's entry points for plugins (~30 ms) on its first model.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    import grpc

    widen(grpc, workers_from_env(os.environ))
    # As `python -m pulumi.dynamic` would have it: the working directory (the Pulumi program's), not this
    # file's, first on the import path, so providers defined in the program's own modules unpickle.
    sys.path[0] = os.getcwd()
    sys.argv[0] = "pulumi.dynamic"
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
