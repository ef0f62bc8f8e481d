"""trainstack's host for Pulumi Python dynamic providers: `pulumi.dynamic` with more RPCs in flight.

The stock host (`python -m pulumi.dynamic`) serves its gRPC API from a pool of 4 threads. Our providers'
create/update calls block while a pod or cluster boots, so with 4 threads a pool of 32 pods boots in waves
of 4. This host runs the very same module, but hands its gRPC server a wider pool: every RPC the engine
sends at once (`pulumi up --parallel`, default unbounded) gets a thread, up to TRAINSTACK_PROVIDER_WORKERS
(default 64). The work each thread does is waiting on RunPod, so threads cost memory (~64 KiB each of
stack touched), not CPU; the client's token bucket keeps the request rate under RunPod's quota whatever
the width.

It also answers one Invoke the stock host does not know, PRELOAD_FUNCTION, sent by the program as it starts
(providers/preload.py): the host imports the listed modules on a background thread, so the modules, pydantic
and our input models are loaded by the time the first check unpickles a provider. Every other Invoke goes
to the stock servicer unchanged.

And it exits when the engine that started it goes away (killed, or crashed): the engine passes its address
as the host's only argument, and, like Pulumi's own plugins (`rpcutil.Healthcheck` in the Go SDK,
sdk/go/common/util/rpcutil/health.go), the host asks the engine's gRPC health service every
TRAINSTACK_ENGINE_CHECK_S seconds (default 10) and stops once the engine no longer answers. The stock host
ignores its argument and lives on, orphaned, until someone kills it.

Installed by scripts/bootstrap next to the CLI, with `pulumi-resource-pulumi-python` that starts it.
"""

from __future__ import annotations

import importlib
import os
import re
import runpy
import signal
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

DEFAULT_WORKERS = 64
MAX_WORKERS = 1024
ENV = "TRAINSTACK_PROVIDER_WORKERS"
# The same string is providers/preload.py's PRELOAD_FUNCTION (a test keeps them equal).
PRELOAD_FUNCTION = "pulumi-python:dynamic:trainstackPreload"
MODULES_ARG = "modules"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


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


# The servicer methods that unpickle a provider, and so may import its modules.
PROVIDER_CALLS = ("Check", "Diff", "Create", "Read", "Update", "Delete")
PRELOAD_WAIT_S = 120.0  # a preload slower than this is not waited for (the call imports what it needs)


def preload_modules(request: Any) -> list[str]:
    """The module names of a preload Invoke; anything that is not a dotted name is dropped."""
    field = request.args.fields.get(MODULES_ARG)
    if field is None:
        return []
    names = [v.string_value for v in field.list_value.values]
    return [n for n in names if _MODULE_NAME.fullmatch(n)]


class Preloader:
    """Imports the program's provider modules on a thread while the engine is still busy elsewhere.

    Provider calls wait until it is done, so a check never imports the same modules concurrently with
    the preload (which could hand it a half-initialised module). A preload asked for after a provider
    call has begun is skipped: that call is importing what it needs already."""

    def __init__(self, importer: Callable[[str], Any] = importlib.import_module) -> None:
        self._import = importer
        self._lock = threading.Lock()
        self._calls_began = False
        self._idle = threading.Event()
        self._idle.set()

    def start(self, modules: list[str]) -> threading.Thread | None:
        if not modules:
            return None  # the language host's early start asks for no modules: nothing to do
        with self._lock:
            if self._calls_began or not self._idle.is_set():
                return None
            self._idle.clear()
        thread = threading.Thread(target=self._run, args=(modules,), name="preload", daemon=True)
        thread.start()
        return thread

    def _run(self, modules: list[str]) -> None:
        try:
            for name in modules:
                try:
                    self._import(name)
                except Exception:  # noqa: S112 - the call that needs it imports it again and reports it
                    continue
        finally:
            self._idle.set()

    def before_call(self) -> None:
        with self._lock:
            self._calls_began = True
        self._idle.wait(PRELOAD_WAIT_S)


def serve_preload(provider_grpc: Any, invoke_response: Callable[[], Any], preloader: Preloader) -> None:
    """Make the next `add_ResourceProviderServicer_to_server` call register a servicer whose Invoke
    answers PRELOAD_FUNCTION itself (at once; `preloader` imports on its own thread) and passes every other
    token to the servicer's own Invoke; its provider calls wait for a preload in progress."""
    real_add: Callable[..., Any] = provider_grpc.add_ResourceProviderServicer_to_server

    def add(servicer: Any, server: Any) -> Any:
        provider_grpc.add_ResourceProviderServicer_to_server = real_add
        stock_invoke = servicer.Invoke

        def invoke(request: Any, context: Any) -> Any:
            if request.tok != PRELOAD_FUNCTION:
                return stock_invoke(request, context)
            preloader.start(preload_modules(request))
            return invoke_response()

        def after_preload(stock: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
            def call(request: Any, context: Any) -> Any:
                preloader.before_call()
                return stock(request, context)

            return call

        servicer.Invoke = invoke
        for name in PROVIDER_CALLS:
            setattr(servicer, name, after_preload(getattr(servicer, name)))
        return real_add(servicer, server)

    provider_grpc.add_ResourceProviderServicer_to_server = add


ENGINE_CHECK_ENV = "TRAINSTACK_ENGINE_CHECK_S"
DEFAULT_ENGINE_CHECK_S = 10.0
# The health service every Pulumi gRPC server registers (rpcutil.Serve): grpc.health.v1.Health/Check.
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_GONE_AFTER = 2  # consecutive failed checks: one slow answer from a busy engine is not a death


def engine_check_interval(environ: dict[str, str] | os._Environ[str]) -> float:
    raw = environ.get(ENGINE_CHECK_ENV, "").strip()
    if not raw:
        return DEFAULT_ENGINE_CHECK_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0.05 <= value <= 3600:  # NaN fails this too
        raise SystemExit(
            f"{ENGINE_CHECK_ENV}={raw!r}: expected seconds between engine health checks, from 0.05 to 3600 "
            f"(unset it for the default, {DEFAULT_ENGINE_CHECK_S:g})"
        )
    return value


def engine_answers(grpc_module: Any, channel: Any, timeout_s: float) -> bool:
    """One health check: an answer, or "unimplemented", means the engine is alive (as rpcutil reads it)."""
    check = channel.unary_unary(_HEALTH_CHECK)  # no serializers: the empty request is b"" on the wire
    try:
        check(b"", timeout=timeout_s)
    except grpc_module.RpcError as err:
        return bool(err.code() == grpc_module.StatusCode.UNIMPLEMENTED)
    return True


def watch_engine(
    grpc_module: Any, address: str, interval_s: float, on_gone: Callable[[], None]
) -> threading.Thread:
    """Check the engine at `address` every `interval_s` seconds on a daemon thread; call `on_gone` once
    it has failed _GONE_AFTER checks in a row."""
    stop = threading.Event()

    def run() -> None:
        with grpc_module.insecure_channel(address) as channel:
            failures = 0
            while not stop.wait(interval_s):
                failures = 0 if engine_answers(grpc_module, channel, max(interval_s, 1.0)) else failures + 1
                if failures >= _GONE_AFTER:
                    on_gone()
                    return

    thread = threading.Thread(target=run, name="engine-health", daemon=True)
    thread.start()
    return thread


def _exit_engine_gone(address: str) -> Callable[[], None]:
    def gone() -> None:
        try:
            print(
                f"trainstack dynamic-provider host: the engine at {address} is gone; exiting", file=sys.stderr
            )
            sys.stderr.flush()
        except OSError:
            pass  # stderr is a pipe to the dead engine (BrokenPipeError): exit all the same
        # os._exit: the gRPC server's threads are not daemons and may be blocked in a provider call.
        os._exit(0)

    return gone


def main() -> None:
    # The engine stops a plugin with SIGINT to its process group and kills it 5 s later if it is still there
    # (the Go SDK's sdk/go/common/resource/plugin/plugin.go); `pulumi.dynamic` stops its server on the
    # KeyboardInterrupt. Started with SIGINT ignored (a job that a shell without job control started in the
    # background: `nohup cmd &`; exec keeps it), Python never raises it, and every close of this host waited
    # the 5 s (issue #47). Python's own handler, as when SIGINT was never ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # pydantic would scan every installed package's entry points for plugins (~30 ms) on its first model.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # gRPC, protobuf and the SDK modules `pulumi.dynamic` serves with, imported with the cyclic garbage
    # collector paused and then frozen out of its later passes (the repo's common/imports.py says why; this
    # file runs from the CLI's folder, so it does the same by hand): 0.49 -> 0.36 CPU-s a host, paired.
    import gc

    gc.disable()
    try:
        import dill  # noqa: F401
        import grpc
        import pulumi.dynamic
        import pulumi.runtime._serialization  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()

    widen(grpc, workers_from_env(os.environ))
    interval = engine_check_interval(os.environ)
    engine = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    if engine:  # none when started by hand (attach mode): nothing to watch
        watch_engine(grpc, engine, interval, _exit_engine_gone(engine))
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    serve_preload(provider_pb2_grpc, provider_pb2.InvokeResponse, Preloader())
    # As `python -m pulumi.dynamic` would have it: the working directory (the Pulumi program's), not this
    # file's, first on the import path, so providers defined in the program's own modules unpickle.
    sys.path[0] = os.getcwd()
    sys.argv[0] = "pulumi.dynamic"
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
