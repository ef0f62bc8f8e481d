"""bench/report.py splice_section: the one way a benchmark writes its own section of docs/PERFORMANCE.md."""

from __future__ import annotations

from bench import forecast, storm, supervisor
from bench.report import splice_section


def test_a_section_is_replaced_in_place_and_the_rest_kept() -> None:
    doc = "# Perf\n\nintro\n<!-- X -->\nold\n<!-- /X -->\ntail\n"
    assert splice_section(doc, "<!-- X -->\nnew\n<!-- /X -->", "<!-- X -->", "<!-- /X -->") == (
        "# Perf\n\nintro\n<!-- X -->\nnew\n<!-- /X -->\ntail\n"
    )


def test_a_missing_section_is_appended() -> None:
    assert splice_section("# Perf\n\n", "<!-- X -->\nnew\n<!-- /X -->", "<!-- X -->", "<!-- /X -->") == (
        "# Perf\n\n<!-- X -->\nnew\n<!-- /X -->\n"
    )


def test_each_benchmark_splices_only_its_own_section() -> None:
    doc = "\n".join(f"{m.BEGIN}\nold {m.__name__}\n{m.END}" for m in (forecast, storm, supervisor))
    for m in (forecast, storm, supervisor):
        doc = m.splice(doc, f"{m.BEGIN}\nnew {m.__name__}\n{m.END}")
    assert "old" not in doc and doc.count("new bench.") == 3
