"""The HTML reports of the real results fixture (tests/fixtures/results/gate-1image), of a
compare of it against itself and of a two-variant study of copies of it (study_fixture;
tests/reports/conftest.py renders them once)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from results_fixture import copy_run
from study_fixture import fixture_study

from crimsonbench.reports.report import write_comparison, write_report
from crimsonbench.reports.study_report import write_study_comparison


@dataclass(frozen=True)
class FixtureReports:
    run_dir: Path  # a copy of the fixture, with report/ written
    report: Path  # report/report.html
    comparison: Path  # comparison.html of the copy against itself
    study: Path  # comparison.html of the study (baseline vs 1.3 times faster)


def render_fixture_reports(root: Path) -> FixtureReports:
    run = copy_run(root / "gate-1image")
    write_report(run)
    write_comparison([run, run], root / "cmp")
    write_study_comparison("fixture-study", fixture_study(root / "study"), root / "study-out")
    return FixtureReports(run, run / "report" / "report.html", root / "cmp" / "comparison.html",
                          root / "study-out" / "comparison.html")  # fmt: skip
