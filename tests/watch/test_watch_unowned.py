"""Issue #45: scripts/watch lists what the account bills that no stack's state holds (scripts/reconcile's
findings, read only), refreshed every few minutes, a problem line when it cannot tell, never a deletion."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from emulator.config import DEFAULT_READ_ONLY_KEY
from harness.inprocess import InProcessRunPod, in_process
from ops import reconcile
from stackview import sources
from tests.ops.test_reconcile import live_names, make
from watch import cli
from watch.render import UNOWNED_SHOWN, render

OUTPUTS: dict[str, Any] = {"nodes": [], "cost_per_hour": 1.0}


@pytest.fixture
def rp(tmp_path: Path) -> Iterator[InProcessRunPod]:
    with in_process(tmp_path / "runpod", spend_limit=500) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text("name: trainstack\nruntime: python\n")
    return tmp_path


@pytest.fixture(autouse=True)
def quiet_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "aggregator_state", lambda stack, outputs, run: {"time": 1.0, "nodes": []})
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)


def text_of(snap: Any) -> str:
    console = Console(width=240, record=True)
    console.print(render(snap))
    return console.export_text()


def test_the_view_lists_what_no_stack_owns_with_a_read_only_key_and_deletes_nothing(
    rp: InProcessRunPod, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = make(rp)
    states = {"dev": {ids["trainstack-dev-pod-0"], "oid-dev-1"}, "prod": set(), "search": set()}
    monkeypatch.setattr(reconcile, "pulumi_states", lambda cwd, say, binary="pulumi": states)
    before = live_names(rp)
    with rp.client(DEFAULT_READ_ONLY_KEY) as client:  # a preview's key is enough to look
        rows = cli.account_unowned(project, client=client, now=rp.world.now())
    names = {r["name"] for r in rows}
    assert "trainstack-dev-pod-0" not in names  # in dev's state
    assert {"trainstack-dev-pod-1", "trainstack-dev-pod-2", "trainstack-prod-cluster", "young"} <= names
    by_name = {r["name"]: r for r in rows}
    assert by_name["trainstack-dev-pod-1"]["action"] == "delete"  # what `scripts/reconcile --delete` would do
    assert by_name["trainstack-dev-pod-2"]["action"] == "report"  # a look-alike
    lost = by_name["trainstack-dev-pod-1"]
    assert lost["usd_per_hour"] > 0 and lost["age_s"] == pytest.approx(7 * 3600)
    assert live_names(rp) == before  # the view only looks

    snap = cli.collect("dev", project, outputs_of=lambda cwd, stack: OUTPUTS, unowned_of=lambda cwd: rows)
    assert json.loads(json.dumps(snap.to_json(), default=str))["unowned"] == list(rows)
    text = text_of(snap)
    per_hour = sum(r["usd_per_hour"] for r in rows)
    assert f"billed, owned by no stack: {len(rows)} resources, ${per_hour:,.2f}/h" in text
    assert "trainstack-dev-pod-1" in text
    hidden = len(rows) - UNOWNED_SHOWN
    assert hidden > 0 and f"... and {hidden} more: scripts/reconcile lists them all" in text
    assert not snap.critical  # money no stack owns is for the team to look at; the run is not critical


def test_an_unreadable_state_is_a_problem_line_not_a_guess(
    rp: InProcessRunPod, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(rp)

    def unreadable(cwd: Path, say: Any, binary: str = "pulumi") -> None:
        say("reconcile: a state is unreadable: `pulumi stack export` failed: no such stack")
        return None

    monkeypatch.setattr(reconcile, "pulumi_states", unreadable)
    with rp.client(DEFAULT_READ_ONLY_KEY) as client:

        def read(cwd: Path) -> tuple[dict[str, Any], ...]:
            return cli.account_unowned(cwd, client=client, now=rp.world.now())

        snap = cli.collect("dev", project, outputs_of=lambda cwd, stack: OUTPUTS, unowned_of=read)
    assert snap.unowned == ()
    said = "reconcile: RuntimeError: reconcile: a state is unreadable"
    assert any(p.startswith(said) for p in snap.problems)
    assert "billed, owned by no stack" not in text_of(snap)


def test_the_account_is_read_once_per_period_and_a_failure_stands_until_the_next_read() -> None:
    clock = [0.0]
    answers: list[Any] = [({"line": "a"},), OSError("RunPod unreachable"), ({"line": "b"},)]
    reads: list[Path] = []

    def read(cwd: Path) -> tuple[dict[str, Any], ...]:
        reads.append(cwd)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    every = cli.Every(read, 900.0, clock=lambda: clock[0])
    assert every(Path(".")) == ({"line": "a"},)
    clock[0] = 899.0
    assert every(Path(".")) == ({"line": "a"},) and len(reads) == 1  # within the period: no new read
    clock[0] = 900.0
    with pytest.raises(OSError, match="RunPod unreachable"):
        every(Path("."))
    clock[0] = 1000.0
    with pytest.raises(OSError):  # the failure stands: the view keeps saying it could not tell
        every(Path("."))
    assert len(reads) == 2
    clock[0] = 1800.0
    assert every(Path(".")) == ({"line": "b"},) and len(reads) == 3


@pytest.mark.parametrize("value", ["-1", "-0.5"])
def test_a_negative_reconcile_period_is_bad_use(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "--cwd", ".", "--once", "--reconcile-every", value]) == cli.EXIT_USAGE
    assert "--reconcile-every must be 0 (never) or more minutes" in capsys.readouterr().err


def test_the_unowned_check_reads_with_the_views_short_deadline(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #62: with the local RunPod stopped, `scripts/watch dev --once` was silent for 188 s: this check
    built its client with the providers' 180 s retry deadline, where every other read of the view gives up
    in 10 s. The client it builds is asked for its deadline, not timed."""
    monkeypatch.setenv("RUNPOD_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RUNPOD_API_KEY", "local-runpod-key")
    seen: list[Any] = []

    def unowned(client: Any, cwd: Path, **_: Any) -> list[reconcile.Finding]:
        seen.append(client)
        return []

    monkeypatch.setattr(reconcile, "unowned", unowned)
    assert cli.account_unowned(project) == ()
    (client,) = seen
    assert client.deadline_s == sources.WATCH_DEADLINE_S
    assert client._http.timeout.read == sources.WATCH_TIMEOUT_S
