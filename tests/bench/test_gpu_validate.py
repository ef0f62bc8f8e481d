"""bench/gpu_validate.py: the GPU validation plans render the dev stack's start scripts and the runners."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.gpu_validate import main, render, render_x2, variant


def test_variant_changes_only_the_shape_and_the_command() -> None:
    config = variant("dev", 2, 1, "train/gpt_train.py --steps 3")
    assert (config.cluster.nodes, config.cluster.gpus_per_node, config.cluster.topology) == (2, 1, "cluster")
    assert config.training.command == ("train/gpt_train.py", "--steps", "3")


def test_one_node_render_writes_the_start_script_the_runners_and_train(tmp_path: Path) -> None:
    out = tmp_path / "run"
    written = {p.name for p in render("dev", 1, 2, out)}
    assert {"start-node-0.sh", "run.sh", "run-2node.sh"} <= written
    assert (out / "run.sh").stat().st_mode & 0o111
    assert (out / "work" / "train").is_dir()
    script = (out / "start-node-0.sh").read_text()
    assert "127.0.0.1" in script
    # The GPU machine has neither the stack's secrets nor an S3 endpoint: the script asks for no secret and
    # the runners log the bucket transfers (a run of 2026-12-03 stopped at "secret AWS_ACCESS_KEY_ID is not
    # filled in" when dev's stack had gained a bucket and its keys).
    assert "SECRET_NAMES=()" in script
    assert all("export TRAINSTACK_DRY_RUN=1" in (out / r).read_text() for r in ("run.sh", "run-2node.sh"))


def test_x2_plan_renders_both_jobs_and_the_host_runner(tmp_path: Path) -> None:
    written = render_x2("dev", tmp_path / "x2")
    names = {p.relative_to(tmp_path / "x2").as_posix() for p in written}
    expected = {"two-nodes/start-node-0.sh", "two-nodes/start-node-1.sh", "one-node/start-node-0.sh", "x2.sh"}
    assert expected <= names
    assert "gpt_train.py" in (tmp_path / "x2" / "two-nodes" / "start-node-1.sh").read_text()


def test_cli_refuses_zero_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--nodes", "0"])
    assert exit_.value.code == 2
    assert "--nodes and --gpus must be at least 1" in capsys.readouterr().err
