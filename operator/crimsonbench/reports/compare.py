"""Side by side comparison of two or more runs: each run's peak per workload, as a ratio
of the first run's (the baseline), and the response curves overlaid."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from matplotlib.figure import Figure

from crimsonbench.reports.plots import cpu_per_step, response_curve
from crimsonbench.reports.tables import Table, to_markdown
from crimsonbench.results.rules import average_repeats, by_workload, is_bandwidth_workload, peak
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import verdict_cell

Run = tuple[RunInfo, Sequence[StepResult]]


def labels(runs: Sequence[Run]) -> list[str]:
    """RunInfo labels, numbered when two runs would otherwise read the same."""
    out: list[str] = []
    for info, _ in runs:
        label, n = info.label, 2
        while label in out:
            label, n = f"{info.label} #{n}", n + 1
        out.append(label)
    return out


def workloads(runs: Sequence[Run]) -> list[str]:
    """Every workload of any run, in the order they first appear."""
    seen: dict[str, None] = {}
    for _, results in runs:
        seen.update(dict.fromkeys(by_workload(results)))
    return list(seen)


def _is_bw(workload: str, bandwidth_workloads: Collection[str] | None) -> bool:
    if bandwidth_workloads is None:
        return is_bandwidth_workload(workload)
    return workload in bandwidth_workloads


def comparison_table(
    runs: Sequence[Run], workload: str, bandwidth_workloads: Collection[str] | None = None
) -> str:
    """Markdown: one row per run with its peak, the latency there, and peak / baseline peak."""
    return to_markdown(comparison_rows(runs, workload, bandwidth_workloads))


def comparison_rows(
    runs: Sequence[Run], workload: str, bandwidth_workloads: Collection[str] | None = None
) -> Table:
    """comparison_table's header and cells."""
    bw = _is_bw(workload, bandwidth_workloads)
    unit = "bw (MiB/s)" if bw else "iops"
    header = ["run", f"peak {unit}", "iodepth", "clat\\_ms", "clat\\_stdev", "clat\\_p99\\_ms"]
    table = Table([*header, "ratio"], [])
    base: float | None = None
    for i, ((_, results), label) in enumerate(zip(runs, labels(runs), strict=True)):
        rows = average_repeats(r for r in results if r.workload == workload)
        if not rows:
            table.rows.append([label] + ["n/a"] * 6)
            continue
        top = peak(rows, bandwidth=bw)
        value = top.fio.bw_mib_s if bw else top.fio.iops
        if i == 0:
            base = value
        ratio = f"{value / base:.2f}" if base else "n/a"  # no baseline, or a zero one
        if verdict_cell(top.extra).startswith("SUSPECT"):  # results.validity
            ratio += " (suspect)"
        cells = [top.fio.clat_mean_ms, top.fio.clat_stdev_ms, top.fio.clat_p99_ms]
        table.rows.append(
            [label, f"{value:.2f}", str(top.iodepth)]
            + ["n/a" if math.isnan(c) else f"{c:.2f}" for c in cells]
            + [ratio]
        )
    return table


BASELINE_NOTE = (
    "Peak = the step with the most IOPS (MiB/s for sequential workloads); repeats of a "
    "step are averaged."
)


def comparison_markdown(
    runs: Sequence[Run], bandwidth_workloads: Collection[str] | None = None
) -> str:
    if len(runs) < 2:
        raise ValueError(f"a comparison needs at least 2 runs, got {len(runs)}")
    names = labels(runs)
    parts = [
        "# Comparison\n",
        f"Baseline (ratio 1.00): **{names[0]}**. {BASELINE_NOTE}\n",
    ]
    for workload in workloads(runs):
        parts.append(f"## {workload}\n")
        parts.append(comparison_table(runs, workload, bandwidth_workloads))
    return "\n".join(parts)


def overlay_figures(
    runs: Sequence[Run], bandwidth_workloads: Collection[str] | None = None
) -> dict[str, tuple[Figure, Figure]]:
    """workload -> (response curves overlaid, CPU per step overlaid), one series per run."""
    out: dict[str, tuple[Figure, Figure]] = {}
    names = labels(runs)
    for workload in workloads(runs):
        series = [
            (name, [r for r in results if r.workload == workload])
            for name, (_, results) in zip(names, runs, strict=True)
        ]
        series = [s for s in series if s[1]]
        out[workload] = (
            response_curve(series, workload, _is_bw(workload, bandwidth_workloads)),
            cpu_per_step(series, workload),
        )
    return out
