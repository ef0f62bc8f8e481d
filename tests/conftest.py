"""Shared fixtures: a local RunPod (`local_runpod`) and a moto S3 server (`moto_s3`), one per session.

`local_runpod` yields `harness.local.LocalRunPod`: `.base_url`, `.api_key`, `.env()` (RUNPOD_API_URL and
RUNPOD_API_KEY), `.client()` (an authenticated httpx.Client) and `.admin` (faults, limits, clock, preempt,
out_of_band, audit, counters, live, reset). Pods reach RUNNING in about 1 s of wall time; the rate limit is
lifted; the spend limit is RunPod's default $80/h (raise it with `admin.limits(spendLimit=...)`).
Tests that change faults or limits should put them back (or call `admin.reset()`, which also deletes
every resource).

Lanes (pyproject.toml's markers, `scripts/test --help`): a test that starts the pulumi CLI, a server or a
network namespace carries the marker that says so (`e2e`, `services`, `root`), on its file; the rest is the
fast lane. Two checks keep the markers true: a test asking for a server fixture without `services`/`e2e`/
`root` stops the collection, and an unmarked test that starts such a process fails (`_lanes_stay_honest`).
Session fixtures are per xdist worker (each worker its own local RunPod and moto, on free ports).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.local import FAST_ARGS, LocalRunPod, MotoS3, start_local_runpod, start_moto_s3
from providers import settings


@pytest.fixture(scope="session")
def local_runpod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunPod]:
    server = start_local_runpod(tmp_path_factory.mktemp("local-runpod"), *FAST_ARGS)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory, monkeypatch_session: None) -> Iterator[str]:
    """The endpoint URL of a moto S3 server; AWS_* test credentials are set for the session."""
    server: MotoS3 = start_moto_s3(Path(tmp_path_factory.mktemp("moto")) / "moto.log")
    yield server.endpoint_url
    server.stop()


@pytest.fixture(scope="session")
def monkeypatch_session() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(autouse=True, scope="session")
def _catalog_read_every_time() -> Iterator[None]:
    """Every provider process reads the GPU catalog itself, as with the shared catalog file off, so one
    test's prices (or faults) never reach another through ~/.cache.
    tests/providers/runpod/test_catalog_cache.py and tests/e2e/test_catalog_shared.py turn the file on where
    they test it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINSTACK_CATALOG_TTL_S", "0")
        yield


@pytest.fixture(autouse=True)
def _capacity_read_per_test() -> Iterator[None]:
    """A provider process reads RunPod's stock once (providers/runpod/capacity.py); a test is one process."""
    from providers.runpod import capacity

    capacity.reset_cache()
    yield
    capacity.reset_cache()


@pytest.fixture(autouse=True)
def _settings_read_per_test() -> Iterator[None]:
    """Each test reads the environment afresh (a provider process reads it once, at first use)."""
    settings.reset()
    yield
    settings.reset()


# Markers of the heavy lanes, and the fixtures that start servers (here and in tests/*/conftest.py).
HEAVY = ("e2e", "services", "root", "slow")
SERVER_FIXTURES = frozenset(
    {"local_runpod", "moto_s3", "frozen_server", "runpod", "keyed_runpod", "bridge", "hosts_env"}
)
# Executables and Python modules that are the CLI, a server or a namespace: never in the fast lane.
_HEAVY_PROGRAMS = {"pulumi": "the pulumi CLI", "sshd": "sshd", "ip": "ip (namespaces)", "unshare": "unshare"}
_HEAVY_SCRIPTS = {"local-runpod", "up", "down", "recover", "bench", "watch"}  # scripts/ that start servers
_HEAVY_MODULES = ("emulator", "train.node.agent", "train.monitor.aggregator", "moto.server")


# A file's cost class, heaviest first (root/slow: emulated hosts and training jobs, minutes each; e2e: the
# real CLI; services: servers; then the unit tests, seconds in all).
_COST_ORDER = (("root", "slow"), ("e2e",), ("services",))


def _cost_class(item: pytest.Item) -> int:
    names = {m.name for m in item.iter_markers()}
    return next((i for i, group in enumerate(_COST_ORDER) if names.intersection(group)), len(_COST_ORDER))


def heaviest_files_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: whole files, heaviest cost class first, otherwise as collected. With
    `--dist loadfile --no-loadscope-reorder` (scripts/test) xdist hands files to workers in this order as each
    frees up, so the minutes-long files start first and the unit tests fill the gaps at the end, instead of
    one worker idling while the other runs a hosts test it was handed last (longest-first scheduling).
    xdist's own default order is by test count, which puts many-case unit files first."""
    files = [item.nodeid.split("::", 1)[0] for item in items]
    cost: dict[str, int] = {}
    for path, item in zip(files, items, strict=True):
        cost[path] = min(cost.get(path, len(_COST_ORDER)), _cost_class(item))
    first_seen = {path: index for index, path in reversed(list(enumerate(files)))}
    order = sorted(range(len(items)), key=lambda i: (cost[files[i]], first_seen[files[i]], i))
    items[:] = [items[i] for i in order]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    heaviest_files_first(items)
    wrong = []
    for item in items:
        servers = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if servers and not {m.name for m in item.iter_markers()} & {"e2e", "services", "root"}:
            wrong.append(f"  {item.nodeid} uses {', '.join(sorted(servers))}")
    if wrong:
        raise pytest.UsageError(
            "tests that start servers must say so: add `pytestmark = pytest.mark.services` (or e2e/root) to "
            "their file, or the fast lane runs them:\n" + "\n".join(wrong[:20])
        )


def heavy_command(args: Any) -> str | None:
    """What a Popen argv starts if it is the CLI, a server or a namespace (None: a plain process)."""
    argv: Sequence[Any] = (
        shlex.split(args)
        if isinstance(args, str)
        else [args]
        if isinstance(args, bytes | os.PathLike)
        else args
    )
    words = [os.fsdecode(a) if isinstance(a, bytes | os.PathLike) else str(a) for a in argv]
    if not words:
        return None
    name = os.path.basename(words[0])
    if name in _HEAVY_PROGRAMS:
        return _HEAVY_PROGRAMS[name]
    if name in _HEAVY_SCRIPTS and os.path.basename(os.path.dirname(words[0])) == "scripts":
        return f"scripts/{name}"
    for i, word in enumerate(words[1:-1], 1):
        if word == "-m" and words[i + 1].startswith(_HEAVY_MODULES):
            return f"python -m {words[i + 1]}"
    if "-c" in words and any("moto.server" in w for w in words):
        return "a moto server"
    return None


_STARTED = pytest.StashKey[list[str]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """A fast-lane test (no heavy marker) that starts the CLI, a server or a namespace fails, in its
    fixtures (module and session ones too) or its body: it belongs in a marked lane. Only processes this
    Python process starts are seen (not what a shell script starts)."""
    if any(item.get_closest_marker(m) for m in HEAVY):
        return (yield)
    started = item.stash[_STARTED] = []
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        what = heavy_command(args)
        if what is not None:
            started.append(what)
            raise AssertionError(f"a fast-lane test started {what}: mark its file {'/'.join(HEAVY)}")
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Fails the test even where the code under test swallowed the guard's AssertionError."""
    report = yield
    started = item.stash.get(_STARTED, [])
    if started and call.when == "call" and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started {', '.join(sorted(set(started)))} without a lane marker "
            f"({'/'.join(HEAVY)}; tests/conftest.py)"
        )
    return report
