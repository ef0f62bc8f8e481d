"""scripts/bench reports only figures whose setup, command and teardown all succeeded, and turns protection
off for its own workspaces (prod's `trainstack:protect: true` made every bench `destroy` fail, so the next
"prod up from empty" adopted the cluster left alive instead of creating one). No CLI runs here."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import bench.main
import bench.run
from bench.main import Bench, measured, run_prod_up
from bench.report import failed_commands
from bench.report import main as report_main
from bench.run import BenchFailed, Measurement
from stackconfig.files import read_config as stack_config


def _measurement(command: str, ok: bool, requests: dict[str, dict[str, int]] | None = None) -> Measurement:
    requests = requests or {}
    total = sum(sum(v.values()) for v in requests.values())
    return Measurement(command, 1.0, requests, {"total": total, "polls": 0, "429": 0}, 10.0, {}, ok)


class FakeWorkspace:
    """Answers each verb with a scripted Measurement, as `Workspace.run(..., check=False)` would."""

    def __init__(self, answers: dict[str, Measurement]) -> None:
        self.stack, self.root, self.answers, self.ran = "prod", Path("/nonexistent"), answers, []

    def run(self, verb: str, *extra: str, check: bool = True) -> Measurement:
        assert not check
        self.ran.append(verb)
        return self.answers[verb]

    def failed(self, verb: str, *extra: str) -> BenchFailed:
        return BenchFailed(f"pulumi {verb} failed")


CREATED = {"POST /v2/clusters": {"201": 1}}


def test_a_failed_teardown_stops_the_benchmark() -> None:
    ws = FakeWorkspace({"up": _measurement("up", True, CREATED), "destroy": _measurement("destroy", False)})
    b: Any = SimpleNamespace(workspace=lambda *a, **k: ws)
    with pytest.raises(BenchFailed, match="destroy failed"):
        run_prod_up(b, 2)
    assert ws.ran == ["up", "destroy"]  # not a second up after a failed destroy


def test_an_up_that_created_no_cluster_is_not_reported_as_a_create() -> None:
    adopted = {"GET /v2/clusters": {"200": 1}, "GET /v2/clusters/{id}/pods": {"200": 1}}
    ws = FakeWorkspace({"up": _measurement("up", True, adopted), "destroy": _measurement("destroy", True)})
    b: Any = SimpleNamespace(workspace=lambda *a, **k: ws)
    with pytest.raises(BenchFailed, match="created no cluster"):
        run_prod_up(b, 1)


def test_a_failed_measured_command_raises_after_logging(capsys: pytest.CaptureFixture[str]) -> None:
    ws: Any = FakeWorkspace({"preview": _measurement("preview", False)})
    with pytest.raises(BenchFailed):
        measured(ws, "preview")
    assert "prod preview: 1.0 s, 0 requests, FAILED" in capsys.readouterr().err


def test_the_benchmarks_workspaces_have_protection_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(bench.run, "Workspace", lambda root, stack, config, *a, **k: made.append(config))
    admin = SimpleNamespace(capacity=lambda **_: None, limits=lambda **_: None)
    runpod: Any = SimpleNamespace(admin=admin, env=dict)
    b = Bench(tmp_path, 20.0, runpod, SimpleNamespace(endpoint_url="http://127.0.0.1:1"))  # type: ignore[arg-type]
    assert stack_config("prod")["trainstack:protect"] is True  # the shipped stack protects its resources
    b.workspace("prod", stack_config("prod"))
    b.workspace("dev", stack_config("dev"))
    assert made[0]["trainstack:protect"] is False
    assert made[0]["trainstack:cluster"] == stack_config("prod")["trainstack:cluster"]  # the rest as shipped
    assert "trainstack:protect" not in made[1]
    assert stack_config("prod")["trainstack:protect"] is True  # the shipped file is not changed


def test_the_report_refuses_results_with_a_failed_command(tmp_path: Path) -> None:
    ok, bad = _measurement("up", True, CREATED).as_dict(), _measurement("destroy", False).as_dict()
    results = {"scale": 20, "prod_up": [ok], "lifecycles": {"prod": {"up": ok, "destroy": bad}}}
    assert failed_commands(results) == [".lifecycles.prod.destroy: destroy"]
    assert failed_commands({"prod_up": [ok, bad]}) == [".prod_up[1]: destroy"]
    path, doc = tmp_path / "results.json", tmp_path / "PERFORMANCE.md"
    path.write_text(json.dumps(results))
    assert report_main([str(path), str(doc), str(tmp_path / "plot.png")]) == 1
    assert not doc.exists() and not (tmp_path / "plot.png").exists()
