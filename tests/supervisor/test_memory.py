"""Memory that outlives the runner (issue #63): a stack without a bucket keeps the supervisor's records on
the machine that runs it, which a CI runner forgets after every round; there it is refused with the fix
(exit 2) instead of acting with no memory (a pod failing after every replace was replaced every round until
the cap)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stackconfig.files import load
from supervisor.cli import CI_WORKFLOW, Round, forgetful_runner, main
from supervisor.observe import Sources, StackUnreadable
from tests.supervisor.test_slurm_observe import OUTPUTS

REPO = Path(__file__).resolve().parents[2]
CI = {"GITHUB_ACTIONS": "true", "GITHUB_WORKFLOW": CI_WORKFLOW}
NO_BUCKET = {"trainstack:supervisor": {"value": json.dumps({"interval_min": 5})}}


def _round(**kw: Any) -> Round:
    return Round(
        "dev",
        Path("."),
        sources=Sources(aggregator=lambda _s, _o: {"time": 1.0, "nodes": []}, billing=lambda _o, **_kw: 1.0),
        read=lambda _w, _s: (OUTPUTS, NO_BUCKET),
        clock=lambda: 1_800_000_000.0,
        log=lambda _l: None,
        **kw,
    )


def test_a_stack_without_a_bucket_is_refused_on_the_supervise_workflows_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in CI.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(StackUnreadable, match=r"has no bucket .* Fix: give the stack a bucket"):
        _round().run_once()


def test_the_refusal_is_exit_2_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    for key, value in CI.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("supervisor.cli.Round", lambda *_a, **_kw: _round())
    assert main(["dev", "--cwd", ".", "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trainstack:bucket" in err[0]


def test_only_the_supervise_workflows_runner_is_forgetful() -> None:
    assert forgetful_runner(CI)
    assert not forgetful_runner({"GITHUB_ACTIONS": "true", "GITHUB_WORKFLOW": "test"})  # the test suite's CI
    assert not forgetful_runner({})  # a machine that keeps ~/.cache/trainstack
    workflow = (REPO / ".github" / "workflows" / "supervise.yml").read_text()
    assert f"\nname: {CI_WORKFLOW}\n" in workflow


def test_every_stack_the_workflow_supervises_has_a_bucket() -> None:
    """The shipped side of the rule: each stack of supervise.yml's matrix keeps its memory in a bucket."""
    workflow = (REPO / ".github" / "workflows" / "supervise.yml").read_text()
    line = next(x for x in workflow.splitlines() if x.strip().startswith("stack: ["))
    stacks = [s.strip() for s in line.split("[", 1)[1].rstrip("]").split(",")]
    assert stacks and all(load(s).bucket is not None for s in stacks), stacks


def test_a_round_without_compute_ends_the_stacks_run_for_its_messages(tmp_path: Path) -> None:
    """The budget warning is kept per run of the stack (store.py), not per set of run ids: the round that
    finds no compute ends that run, so the next compute's run is warned anew."""
    from supervisor import store
    from supervisor.localstore import LOCAL_BUCKET, DirObjects

    mem = DirObjects(tmp_path)
    store.write_notice(mem, LOCAL_BUCKET, "dev", ("dev-pod-a-0",), "over_budget:0.8", 1.0)
    no_compute = replace(_round(memory=mem), read=lambda _w, _s: ({}, NO_BUCKET))
    record = no_compute.run_once()
    assert record.observation.nodes == 0 and record.decision.state == "no_compute"
    assert not store.end_run(mem, LOCAL_BUCKET, "dev", 2.0)  # the round ended it already
    assert store.read_notices(mem, LOCAL_BUCKET, "dev", ("dev-pod-b-0",)) == ()
