"""train/node/launch.py's gate, without torch (the project's venv has none): what it does once the preflight
has a verdict. The preflight itself in the one launch runs on the local RunPod's nodes (tests/hosts/) and in
`tests/train/test_launch_torch.py` where the nodes' torch venv exists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from train.node import launch


def test_the_failure_line_is_the_preflights_own() -> None:
    out = "TRAINSTACK_ALLREDUCE ranks=2\nTRAINSTACK_FAIL node: bus bandwidth 0.2 GB/s under 300\n"
    out += "TRAINSTACK_FAIL a second line\n"
    assert launch.fail_line(out) == "node: bus bandwidth 0.2 GB/s under 300"
    assert launch.fail_line("TRAINSTACK_BUSBW_GB_PER_S=1.0\n") is None


def test_the_training_command_as_torchrun_reads_it() -> None:
    assert launch.training_argv(["train/train.py", "--steps", "3"]) == (
        "path",
        ["train/train.py", "--steps", "3"],
    )
    assert launch.training_argv(["-m", "pkg.job", "--x"]) == ("module", ["pkg.job", "--x"])
    with pytest.raises(SystemExit, match="no training command"):
        launch.training_argv([])
    with pytest.raises(SystemExit, match="-m needs a module"):
        launch.training_argv(["-m"])


def test_a_command_is_required_after_the_separator(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="after --"):
        launch.main(["--gate", str(tmp_path)])


def test_a_refused_node_never_trains_however_often_torchrun_restarts_it(tmp_path: Path) -> None:
    gate = launch.Gate(tmp_path)
    gate.mark(gate.failed, "node: all-reduce bus bandwidth 0.2 GB/s is under the floor of 300 GB/s")
    script = tmp_path / "job.py"
    script.write_text(f"open({str(tmp_path / 'trained')!r}, 'w').close()\n")
    assert launch.main(["--gate", str(tmp_path), "--", str(script)]) == 1
    assert not (tmp_path / "trained").exists()


def _opened(tmp: Path) -> launch.Gate:
    """A gate as a restarted worker group finds it: the preflight passed and the start script said go."""
    gate = launch.Gate(tmp / "gate")
    gate.root.mkdir()
    gate.mark(gate.passed)
    gate.mark(gate.go)
    return gate


def test_after_the_preflight_and_go_the_command_runs_in_this_process_as_python_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart of the group (torchrun --max-restarts) finds `passed` and `go`: training at once, with the
    script's own folder first on sys.path and its arguments in sys.argv; its exit status is the worker's."""
    gate = _opened(tmp_path)
    job = tmp_path / "job"
    job.mkdir()
    (job / "helper.py").write_text("VALUE = 'beside the script'\n")
    out = tmp_path / "seen"
    (job / "train.py").write_text(
        "import sys, helper\n"
        f"open({str(out)!r}, 'w').write(' '.join(sys.argv) + '|' + helper.VALUE + '|' + __name__)\n"
        "sys.exit(3)\n"
    )
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as exc:
        launch.main(["--gate", str(gate.root), "--", str(job / "train.py"), "--steps", "5"])
    assert exc.value.code == 3
    assert out.read_text() == f"{job / 'train.py'} --steps 5|beside the script|__main__"


def test_a_module_command_runs_as_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _opened(tmp_path)
    pkg = tmp_path / "jobpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    out = tmp_path / "seen"
    (pkg / "run.py").write_text(
        f"import sys\nif __name__ == '__main__':\n    open({str(out)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
    )
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert launch.main(["--gate", str(gate.root), "--", "-m", "jobpkg.run", "--lr", "0.1"]) == 0
    assert out.read_text() == "--lr 0.1"


def test_waiting_at_the_gate_ends_with_go_or_with_the_agent() -> None:
    """No `go` and the agent gone (its parent pid changed): the worker leaves instead of waiting forever."""
    gate = launch.Gate(Path("/nonexistent-gate"))
    answers = iter([True, True, False])
    assert launch.wait_for_go(gate, lambda: next(answers), poll_s=0) is False


def test_go_ends_the_wait(tmp_path: Path) -> None:
    gate = launch.Gate(tmp_path)
    calls: list[int] = []

    def alive() -> bool:
        calls.append(1)
        if len(calls) == 2:
            gate.mark(gate.go)  # what the start script does once the checkpoint is fetched
        return True

    assert launch.wait_for_go(gate, alive, poll_s=0) is True
    assert len(calls) == 2
