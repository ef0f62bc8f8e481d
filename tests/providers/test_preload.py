"""providers/preload.py: the program's early request that starts the dynamic-provider host."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import grpc
import pulumi
import pytest
from pulumi.runtime.proto import resource_pb2_grpc

import components.cluster
import components.delivery
from providers import preload


class _RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return "id", {}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        self.calls.append(args.token)
        return {}, None


class _RefusingMonitor(resource_pb2_grpc.ResourceMonitorStub):
    """An engine that answers the Invoke as a stock host would: not implemented."""

    def __init__(self) -> None:  # no channel: only Invoke is used
        self.requests: list[Any] = []

    def Invoke(self, request: Any) -> Any:
        self.requests.append(request)
        raise _Unimplemented()


class _Unimplemented(grpc.RpcError):
    pass


def test_under_mocks_nothing_is_sent() -> None:
    mocks = _RecordingMocks()
    pulumi.runtime.set_mocks(mocks, preview=True)
    assert preload.request_preload() is None
    assert mocks.calls == []


def test_the_request_names_the_modules_and_a_refusal_is_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monitor = _RefusingMonitor()
    monkeypatch.setattr("pulumi.runtime.settings.get_monitor", lambda: monitor)
    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    thread = preload.request_preload(["providers.runpod.pod", "providers.s3.bucket"])
    assert thread is not None and thread.daemon
    thread.join()
    (request,) = monitor.requests
    assert request.tok == preload.PRELOAD_FUNCTION
    names = [v.string_value for v in request.args.fields[preload.MODULES_ARG].list_value.values]
    assert names == ["providers.runpod.pod", "providers.s3.bucket"]
    assert uncaught == []


@pytest.mark.parametrize("bad", ["", "providers/runpod/pod.py", "os; rm -rf /", "a..b"])
def test_bad_module_names_are_refused_with_the_fix(bad: str) -> None:
    with pytest.raises(ValueError, match=r"dotted names like 'pkg\.mod'"):
        preload.request_preload([bad])


def test_the_list_covers_every_dynamic_resource_the_program_declares() -> None:
    # The provider module unpickled at a check is the module of the resource's provider class; ours keep
    # provider and resource in one module.
    declared = {
        cls.__module__
        for module in (components.cluster, components.delivery)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, pulumi.dynamic.Resource)
    }
    assert declared == set(preload.PROVIDER_MODULES)
