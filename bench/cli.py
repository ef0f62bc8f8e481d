"""`scripts/bench` and `scripts/bench-emulator` (`trainstack bench`): the runs and report of bench/, in order.

    scripts/bench [--quick] [--scale F] [--runs N] [--scale-one]   the runs, docs/PERFORMANCE.md and its plot
    scripts/bench --report-only                                    re-render from .state/bench/results.json
    scripts/bench --forecast | --supervisor                        one section (bench/forecast.py, ...)
    sudo scripts/bench --storm [--run-hours H] [--faults-only|--no-faults]  goodput with a fault storm
Each run keeps the previous results (results.previous.json) and the report compares the two.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from common import pulumi
from ops import workflow
from ops.cli import wants_help


def bench(argv: Sequence[str]) -> int:
    from bench import forecast, main, report, storm, supervisor

    if wants_help(argv):  # the runs' own parser, then the modes this entry point adds
        try:
            return main.main(["--help"])
        finally:
            print(__doc__)
    workflow.bootstrap("scripts/bench")
    os.environ.update(pulumi.environment())
    os.chdir(pulumi.REPO)
    results, previous, doc = (
        ".state/bench/results.json",
        ".state/bench/results.previous.json",
        "docs/PERFORMANCE.md",
    )
    first, rest = (argv[0] if argv else ""), list(argv[1:])
    if first == "--forecast":
        return forecast.main(["--results", results, "--doc", doc, *rest])
    if first == "--supervisor":
        return supervisor.main(["--results", results, "--doc", doc, *rest])
    if first == "--storm":
        return storm.main(["--out", ".state/bench/storm.json", "--doc", doc, *rest])
    if first != "--report-only":
        if os.path.exists(results):
            shutil.copyfile(results, previous)  # the report's before column
        if (code := main.main(["--out", results, *argv])) != 0:
            return code
    before = ["--before", previous] if os.path.exists(previous) else []
    return report.main([results, doc, "docs/performance-scaling.png", *before])


def emulator(argv: Sequence[str]) -> int:
    from bench.emulator import main

    sys.argv = ["scripts/bench-emulator", *argv]
    main()
    return 0
