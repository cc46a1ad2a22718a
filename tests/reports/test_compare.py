from __future__ import annotations

import pytest
from matplotlib.container import ErrorbarContainer
from report_helpers import make_step, run_info, sweep

from crimsonbench.reports.compare import (
    comparison_markdown,
    comparison_table,
    labels,
    overlay_figures,
)

BASE = sweep("randread4k", [(1, 100000.0, 0.3), (8, 130000.0, 2.0)]) + sweep(
    "seqread64k", [(1, 20000.0, 1.0)], start=2
)
FAST = sweep("randread4k", [(1, 150000.0, 0.2), (8, 390000.0, 0.8)]) + sweep(
    "seqread64k", [(1, 20000.0, 1.0), (4, 18000.0, 4.0)], start=2, scale=0.9
)
RUNS = [(run_info("classic", "classic", "bluestore"), BASE), (run_info("sea"), FAST)]


def table_rows(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in md.splitlines()[2:]]


def test_ratio_of_peaks_against_the_first_run() -> None:
    rows = table_rows(comparison_table(RUNS, "randread4k"))
    assert rows[0] == [
        "classic (classic/bluestore 1osd osd)",
        "130000.00",
        "8",
        "2.00",
        "0.67",
        "6.00",
        "1.00",
    ]
    assert rows[1][1:3] == ["390000.00", "8"]
    assert rows[1][-1] == f"{390000 / 130000:.2f}" == "3.00"


def test_sequential_peaks_compare_bandwidth() -> None:
    md = comparison_table(RUNS, "seqread64k")
    assert "| peak bw (MiB/s)|" in md.splitlines()[0]
    rows = table_rows(md)
    assert rows[0][1] == f"{20000 * 64 / 1024:.2f}"
    assert rows[1][1] == f"{20000 * 0.9 * 64 / 1024:.2f}" and rows[1][-1] == "0.90"


def test_a_workload_missing_from_a_run() -> None:
    only_base = [(run_info("a"), BASE), (run_info("b"), [make_step("randwrite4k", 1, 10.0)])]
    rows = table_rows(comparison_table(only_base, "randread4k"))
    assert rows[1][1:] == ["n/a"] * 6
    rows = table_rows(comparison_table(only_base, "randwrite4k"))
    assert rows[0][1] == "n/a" and rows[1][-1] == "n/a"  # no baseline to divide by


def test_markdown_has_a_section_per_workload() -> None:
    md = comparison_markdown(RUNS)
    assert md.index("## randread4k") < md.index("## seqread64k")
    assert "Baseline (ratio 1.00): **classic (classic/bluestore 1osd osd)**" in md


def test_same_labels_are_numbered() -> None:
    assert labels([(run_info("x"), []), (run_info("x"), []), (run_info("x"), [])]) == [
        "x (crimson/seastore 1osd_56reactor osd)",
        "x (crimson/seastore 1osd_56reactor osd) #2",
        "x (crimson/seastore 1osd_56reactor osd) #3",
    ]


def test_needs_two_runs() -> None:
    with pytest.raises(ValueError, match="at least 2 runs"):
        comparison_markdown(RUNS[:1])


def test_overlay_plots_have_a_series_per_run() -> None:
    figs = overlay_figures(RUNS)
    assert list(figs) == ["randread4k", "seqread64k"]
    curve, cpu = figs["randread4k"]
    bars = [c for c in curve.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2
    assert [len(ax.get_lines()) for ax in cpu.axes] == [2, 2]
    assert "MiB/s" in figs["seqread64k"][0].axes[0].get_xlabel()
