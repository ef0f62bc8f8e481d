"""scripts/watch on a `scheduler: slurm` stack: it is told by its outputs, and shows Slurm's queue."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from components.slurm import SBATCH
from stackview import sources
from tests.watch.test_watch import OUTPUTS, _snap
from watch.render import render


def test_a_slurm_stack_is_told_by_its_rendered_sbatch_script() -> None:
    assert sources.is_slurm_stack(OUTPUTS | {"start_script_sha256": {SBATCH: "ab", "start-node-0.sh": "cd"}})
    assert not sources.is_slurm_stack(OUTPUTS | {"start_script_sha256": {"start-node-0.sh": "cd"}})
    assert not sources.is_slurm_stack(OUTPUTS)


def test_the_queue_is_shown_one_line_a_job_and_nothing_without_one() -> None:
    console = Console(record=True, width=200)
    queue = ("7 local-cpu RUNNING 0:42 2 podA,podB", "6 local-cpu COMPLETED 1:10 2 podA,podB")
    console.print(render(dataclasses.replace(_snap(), slurm_queue=queue)))
    text = console.export_text()
    assert "slurm: 7 local-cpu RUNNING 0:42 2 podA,podB" in text
    assert "slurm: 6 local-cpu COMPLETED" in text
    plain = Console(record=True, width=200)
    plain.print(render(_snap()))
    assert "slurm:" not in plain.export_text()
