"""Issue #62 with two local RunPods (in process): the demo's, and one standing in for the team's account that
the target rule reads as real (its URL is https://api.runpod.io). Both hold a `trainstack-dev-pod-0` with
dev's mark; only the demo's was made by the demo's `dev`, whose state recorded its owner id. In the shells of
the issue the orphan check is refused before it reads; and even handed the team's account with the demo's
state, it deletes nothing of the team's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.config import DEFAULT_API_KEY
from facts.pods import OWNER_ENV, OWNER_ID_ENV
from harness.inprocess import InProcessRunPod, in_process
from ops import orphans
from tests.emulator.conftest import pod_body
from tests.ops.test_orphans import DEV

TEAM_URL = "https://api.runpod.io"
DEMO_URL = "http://127.0.0.1:40999"
MARK = {OWNER_ENV: "trainstack/dev"}


@pytest.fixture
def runpods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, InProcessRunPod]]:
    """The two RunPods, each reached by the client the orphan check builds for its URL."""
    with in_process(tmp_path / "demo") as demo, in_process(tmp_path / "team") as team:
        by_url = {DEMO_URL: demo, TEAM_URL: team}

        def from_env(cls: Any, **_: Any) -> Any:
            import os

            return by_url[os.environ["RUNPOD_API_URL"]].client(DEFAULT_API_KEY)

        import providers.runpod.client

        monkeypatch.setattr(providers.runpod.client.RunPodClient, "from_env", classmethod(from_env))
        yield by_url


def _pod(rp: InProcessRunPod, owner_id: str) -> str:
    with httpx.Client(base_url=rp.base_url, transport=rp.transport) as api:
        api.headers["Authorization"] = f"Bearer {DEFAULT_API_KEY}"
        body = pod_body("trainstack-dev-pod-0", env={**MARK, OWNER_ID_ENV: owner_id})
        return str(api.post("/v2/pods", json=body).json()["id"])


def _live(rp: InProcessRunPod) -> set[str]:
    return set(rp.world.pods)


def _check(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], recorded: set[str]) -> int:
    """`python -m ops.orphans dev --delete --yes` on the demo's dev, whose state holds no pod id (its create
    was cut short) and recorded `recorded`."""
    for key in ("RUNPOD_API_URL", "RUNPOD_API_KEY", "TRAINSTACK_LOCAL", "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    state = {
        "resources": [],
        "pending_operations": [{"resource": {"inputs": {"env": {OWNER_ID_ENV: o}}}} for o in recorded],
    }
    monkeypatch.setattr(orphans, "export_state", lambda stack, cwd: state)
    monkeypatch.setattr(orphans, "stack_declared", lambda stack, cwd: DEV)
    return orphans.main(["dev", "--cwd", "/nowhere", "--delete", "--yes"])


def test_the_teams_pod_survives_every_shell(
    runpods: dict[str, InProcessRunPod], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo, team = runpods[DEMO_URL], runpods[TEAM_URL]
    demos = _pod(demo, "demo-dev-0")  # the demo dev's create, cut short: its owner id is in its state
    teams = _pod(team, "team-dev-0")  # the team's dev: same name, same mark, its own state's owner id
    recorded = {"demo-dev-0"}
    # The shells: refused before any read.
    mixed = {"TRAINSTACK_LOCAL": "1", "RUNPOD_API_URL": TEAM_URL, "RUNPOD_API_KEY": "rpa_TEAM"}
    assert _check(monkeypatch, mixed, recorded) == orphans.NOT_CHECKED
    assert _check(monkeypatch, {"RUNPOD_API_KEY": "rpa_TEAM"}, recorded) == orphans.NOT_CHECKED
    assert "not checked" in capsys.readouterr().err
    assert teams in _live(team)
    # A shell the rule lets through (the team's URL, a file backend of its own) handed the demo's state:
    # the team's pod is not provably dev's (its owner id is not one the state recorded). Kept.
    own = {"RUNPOD_API_URL": TEAM_URL, "RUNPOD_API_KEY": "rpa_TEAM", "PULUMI_BACKEND_URL": "file:///tmp/own"}
    assert _check(monkeypatch, own, recorded) == 0
    assert teams in _live(team)
    assert "not one stack 'dev''s state recorded" in capsys.readouterr().err
    # The demo's own shell: its cut-short pod is the one deleted.
    assert _check(monkeypatch, {"RUNPOD_API_URL": DEMO_URL}, recorded) == 0
    assert demos not in _live(demo) and teams in _live(team)
