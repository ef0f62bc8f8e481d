"""docs/RELIABILITY.md: a partial run updates its own rows and keeps everyone else's."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.reliability import Report


def _rows(path: Path) -> dict[str, str]:
    return {
        line.split(" | ")[0].removeprefix("| "): line
        for line in path.read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| scenario")
    }


def test_a_partial_run_keeps_the_rows_it_did_not_run(tmp_path: Path) -> None:
    report_file = tmp_path / "RELIABILITY.md"
    full = Report()
    full.record("lifecycle: `dev` stack", "up; destroy", [], [], runs=6)
    full.record("lifecycle: `prod` stack", "up; destroy", [], [], runs=6)
    full.record("fault: 30 % of requests answer 503", "converged", [], [])
    full.write(report_file)

    partial = Report()  # e.g. `pytest tests/e2e/test_lifecycle.py -k dev`
    partial.record("lifecycle: `dev` stack", "up; refresh; destroy", ["pod-1"], [], runs=7)
    partial.write(report_file)

    rows = _rows(report_file)
    assert sorted(rows) == [
        "fault: 30 % of requests answer 503",
        "lifecycle: `dev` stack",
        "lifecycle: `prod` stack",
    ]
    assert rows["lifecycle: `dev` stack"] == "| lifecycle: `dev` stack | 7 | up; refresh; destroy | 1 | 0 |"
    assert rows["lifecycle: `prod` stack"] == "| lifecycle: `prod` stack | 6 | up; destroy | 0 | 0 |"


def test_a_session_that_ran_no_scenario_leaves_the_file_alone(tmp_path: Path) -> None:
    report_file = tmp_path / "RELIABILITY.md"
    report_file.write_text("kept\n")
    Report().write(report_file)
    assert report_file.read_text() == "kept\n"


def test_a_hand_written_section_after_the_table_is_kept_once(tmp_path: Path) -> None:
    report_file = tmp_path / "RELIABILITY.md"
    first = Report()
    first.record("lifecycle: `dev` stack", "up; destroy", [], [], runs=6)
    first.write(report_file)
    section = "## Hardening\n\n| class | tried |\n|---|---|\n| 1. orphans | look-alikes |\n"
    report_file.write_text(report_file.read_text() + "\n" + section)
    for runs in (7, 8):  # two later sessions
        again = Report()
        again.record("lifecycle: `dev` stack", "up; destroy", [], [], runs=runs)
        again.write(report_file)
    text = report_file.read_text()
    assert text.count("## Hardening") == 1 and text.count("| 1. orphans | look-alikes |") == 1
    assert text.endswith(section)
    assert "| lifecycle: `dev` stack | 8 |" in text
