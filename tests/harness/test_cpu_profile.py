"""harness/cpu_profile.py: the records of a profiled test run summed per file, sorted, reported and compared
with the previous run (scripts/test --profile). Plain function calls on made-up records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cpu_profile import (
    CONTROLLER,
    STARTUP,
    FileCost,
    Profile,
    Segment,
    build,
    load,
    main,
    merge,
    prune,
    read_segments,
    report,
    save,
)


def seg(file: str, cpu_s: float, tests: int = 1, worker: str = "gw0", wall_s: float = 1.0) -> Segment:
    return Segment(file=file, cpu_s=cpu_s, wall_s=wall_s, tests=tests, worker=worker, method="cgroup")


def profile(rows: dict[str, float], selection: str = "full") -> Profile:
    return build([seg(file, cpu) for file, cpu in rows.items()], selection, "2026-12-03T00:00:00Z")


def test_merge_sums_a_file_split_over_workers_and_sorts_costliest_first() -> None:
    rows = merge(
        [
            seg("tests/a.py", 1.5, tests=2, worker="gw0", wall_s=2.0),
            seg("tests/b.py", 4.0, tests=1, worker="gw0"),
            seg("tests/a.py", 3.0, tests=3, worker="gw1", wall_s=5.0),
            seg("tests/c.py", 0.25),
            seg(STARTUP, 2.0, tests=0, worker="gw0"),
            seg(STARTUP, 2.5, tests=0, worker="gw1"),
        ]
    )
    assert rows == (
        FileCost(STARTUP, 4.5, 2.0, 0, 2),
        FileCost("tests/a.py", 4.5, 7.0, 5, 2),
        FileCost("tests/b.py", 4.0, 1.0, 1, 1),
        FileCost("tests/c.py", 0.25, 1.0, 1, 1),
    )  # a.py and the start-up tie at 4.5: by name, "(" before "t"


def test_the_total_is_every_row_and_the_file_count_leaves_out_the_pytest_rows() -> None:
    current = profile({"tests/a.py": 10.0, "tests/b.py": 2.5, STARTUP: 3.0, CONTROLLER: 1.0})
    assert current.total_cpu_s == pytest.approx(16.5)
    assert current.test_files == 2
    assert current.methods == ("cgroup",)
    assert [row.file for row in current.files] == ["tests/a.py", STARTUP, "tests/b.py", CONTROLLER]


def test_report_without_a_previous_run_lists_the_top_rows_and_no_change() -> None:
    current = profile({f"tests/t{i:02d}.py": float(i) for i in range(1, 13)})  # 12 files, 78 CPU-s
    lines = report(current, None, top=10)
    assert lines[0] == "== CPU profile: 78.0 CPU-s in 12 test files (selection: full; method: cgroup)"
    assert not any("previous" in line for line in lines)
    files = [line.split()[-1] for line in lines[3:]]
    assert files == [f"tests/t{i:02d}.py" for i in range(12, 2, -1)]  # the ten dearest, dearest first
    assert lines[3].split()[:2] == ["12.0", "15%"]  # 12 of 78 CPU-s


def test_report_compares_the_total_and_each_top_file_with_the_previous_run() -> None:
    previous = profile({"tests/a.py": 10.0, "tests/b.py": 5.0, "tests/c.py": 0.02, "tests/gone.py": 4.98})
    current = profile({"tests/a.py": 7.5, "tests/b.py": 6.0, "tests/c.py": 0.0, "tests/new.py": 1.5})
    lines = report(current, previous)
    assert "previous run (2026-12-03T00:00:00Z): 20.0 CPU-s, change -5.0 CPU-s (-25.0%)" in lines[1]
    by_file = {line.split()[-1]: line.split() for line in lines[4:]}
    assert by_file["tests/a.py"][2] == "-2.5"
    assert by_file["tests/b.py"][2] == "+1.0"
    assert by_file["tests/new.py"][2] == "new"
    assert by_file["tests/c.py"][2] == "+0.0"  # 0.02 CPU-s less: nothing at this precision, and no "-0.0"
    assert "tests/gone.py" not in by_file
    assert not any("another selection" in line for line in lines)


def test_report_says_when_the_previous_run_ran_another_selection() -> None:
    previous = profile({"tests/policy/test_pack.py": 1.0}, selection="fast tests/policy")
    current = profile({"tests/a.py": 100.0, "tests/b.py": 50.0}, selection="full")
    lines = report(current, previous)
    assert "change +149.0 CPU-s (+14900.0%)" in lines[1]
    assert lines[2] == "   (the previous run ran another selection: fast tests/policy)"


def test_records_are_read_from_every_worker_and_a_torn_line_is_counted_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "gw0-11.jsonl").write_text(seg("tests/a.py", 1.0).to_json() + "\n\n")
    (tmp_path / "gw1-12.jsonl").write_text(seg("tests/b.py", 2.0, worker="gw1").to_json() + '\n{"file": "te')
    segments, bad = read_segments(tmp_path)
    assert segments == [seg("tests/a.py", 1.0), seg("tests/b.py", 2.0, worker="gw1")]
    assert bad == 1


def test_a_profile_survives_its_file_and_a_missing_or_broken_one_is_no_previous_run(tmp_path: Path) -> None:
    current = profile({"tests/a.py": 3.0, STARTUP: 1.0})
    save(current, tmp_path / "last.json")
    assert load(tmp_path / "last.json") == current
    assert json.loads((tmp_path / "last.json").read_text())["total_cpu_s"] == 4.0
    assert load(tmp_path / "missing.json") is None
    (tmp_path / "broken.json").write_text('{"selection": "full"}')
    assert load(tmp_path / "broken.json") is None


def test_prune_keeps_the_newest_runs_and_the_current_one(tmp_path: Path) -> None:
    names = [f"2026120{d}T000000Z-1" for d in range(1, 8)]
    for name in [*names, "not-a-run"]:
        (tmp_path / name).mkdir()
    prune(tmp_path, keep=3, current=tmp_path / names[-1])
    assert sorted(p.name for p in tmp_path.iterdir()) == [*names[-3:], "not-a-run"]


def test_main_writes_the_table_and_the_next_run_compares_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "20261203T010000Z-1", tmp_path / "20261203T020000Z-2"
    for run, cpu in ((first, 8.0), (second, 6.0)):
        run.mkdir()
        (run / "main-1.jsonl").write_text(seg("tests/a.py", cpu).to_json() + "\n")
    assert main([str(first), "--selection", "fast"]) == 0
    assert "previous" not in capsys.readouterr().out
    assert main([str(second), "--selection", "fast"]) == 0
    out = capsys.readouterr().out
    assert "previous run (" in out and "8.0 CPU-s, change -2.0 CPU-s (-25.0%)" in out
    saved = load(tmp_path / "last.json")
    assert saved is not None and saved.total_cpu_s == 6.0
    assert load(second / "profile.json") == saved


def test_main_with_no_records_says_so_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "20261203T010000Z-1"
    run.mkdir()
    assert main([str(run)]) == 1
    assert "no records" in capsys.readouterr().err
    assert not (tmp_path / "last.json").exists()
