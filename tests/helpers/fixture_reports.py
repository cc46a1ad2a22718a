"""The HTML reports of the real results fixture (tests/fixtures/results/gate-1image) and
of a compare of it against itself (tests/reports/conftest.py renders them once)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from results_fixture import copy_run

from crimsonbench.reports.report import write_comparison, write_report


@dataclass(frozen=True)
class FixtureReports:
    run_dir: Path  # a copy of the fixture, with report/ written
    report: Path  # report/report.html
    comparison: Path  # comparison.html of the copy against itself


def render_fixture_reports(root: Path) -> FixtureReports:
    run = copy_run(root / "gate-1image")
    write_report(run)
    write_comparison([run, run], root / "cmp")
    return FixtureReports(run, run / "report" / "report.html", root / "cmp" / "comparison.html")
