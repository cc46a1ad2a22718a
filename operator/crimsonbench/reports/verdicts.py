"""The regression verdicts of `crimsonbench compare`: each run after the first against the
first (the baseline), per workload and iodepth, as a markdown table, plus the rows a CI
gate fails on. The statistics are results.verdict's."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from crimsonbench.reports.tables import Table
from crimsonbench.results.gate import GateFailure, regressions
from crimsonbench.results.iops_log import IOPS_PER_SECOND
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.verdict import (
    HEADER,
    StepFigures,
    Verdict,
    compare,
    figures_from_results,
)

Run = tuple[RunInfo, Sequence[StepResult]]


def run_verdicts(
    base: Run,
    new: Run,
    bandwidth_workloads: Collection[str],
    alpha: float = 0.05,
    allow_suspect: bool = False,
) -> list[Verdict]:
    def figures(run: Run) -> list[StepFigures]:
        results = run[1]
        series = {r.step_id: r.extra.get(IOPS_PER_SECOND) or () for r in results}
        return figures_from_results(results, bandwidth_workloads, series)

    return compare(figures(base), figures(new), alpha=alpha, allow_suspect=allow_suspect)


def verdict_intro(threshold_pct: float, alpha: float) -> str:
    return (
        f"Regression: worse by more than {threshold_pct:g} % and significant at "
        f"alpha {alpha:g} (Holm-adjusted over the rows). Tests: Welch's t over repeats; with "
        "one repeat, a block bootstrap over fio's per-second IOPS (within-run noise only). "
        "A row that cannot be tested says why, and fails the gate."
    )


def verdict_table(rows: Sequence[Verdict], threshold_pct: float, alpha: float) -> Table:
    """One row per Verdict; a regression's verdict cell is marked **REGRESSION** (...)."""
    bad = regressions(rows, threshold_pct, alpha)
    table = Table(list(HEADER), [])
    for r in rows:
        cells = list(r.cells())
        if r in bad:
            cells[-1] = f"**REGRESSION** ({cells[-1]})"
        table.rows.append(cells)
    return table


def gate_lines(
    rows: Sequence[Verdict],
    threshold_pct: float,
    alpha: float,
    failures: Sequence[GateFailure] = (),
    allowed: Sequence[GateFailure] = (),
) -> list[str]:
    """What follows the table: the regression count, the gate and every reason it fails,
    then the untested rows let through by --allow-untested ("- " marks a list item)."""
    bad = regressions(rows, threshold_pct, alpha)
    lines = [f"{len(bad)} regression(s)" if bad else "no regression beyond the threshold"]
    if failures:
        lines += ["", f"Gate: FAILED ({len(failures)}):"]
        lines += [f"- {f.line()}" for f in failures]
    else:
        lines += ["", "Gate: passed"]
    if allowed:
        lines += ["", f"Untested, allowed by --allow-untested ({len(allowed)}):"]
        lines += [f"- {f.line()}" for f in allowed]
    return lines


def verdict_markdown(
    base_label: str,
    new_label: str,
    rows: Sequence[Verdict],
    threshold_pct: float,
    alpha: float,
    failures: Sequence[GateFailure] = (),
    allowed: Sequence[GateFailure] = (),
) -> str:
    """The verdict table of NEW vs BASE, then the gate: every reason it fails (and the
    untested rows let through by --allow-untested)."""
    table = verdict_table(rows, threshold_pct, alpha)
    lines = [
        f"### {new_label} vs {base_label}\n",
        verdict_intro(threshold_pct, alpha) + "\n",
        "| " + " | ".join(table.header) + " |",
        "| " + " | ".join("---" for _ in table.header) + " |",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in table.rows]
    lines.append("")
    lines += gate_lines(rows, threshold_pct, alpha, failures, allowed)
    return "\n".join(lines) + "\n"
