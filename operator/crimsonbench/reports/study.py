"""A study's comparison: the variants, the grid (variants x workloads: peak, knee, p99 at
the knee, peak per OSD core and per GiB of OSD memory), each variant's verdict against the
baseline variant, and the best variant per workload with its margin. Pure: a StudyView
in, markdown and one HTML page out (reports.study_report writes them with the overlaid
curves and the full verdict tables of `compare`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.reports.html_page import note, table_html
from crimsonbench.reports.tables import Table, fmt_figure, to_markdown
from crimsonbench.reports.verdicts import run_verdicts
from crimsonbench.results.study import Cell, Run, best_per_workload, cells
from crimsonbench.results.verdict import Verdict


@dataclass(frozen=True)
class VariantRow:
    """A variant as the study planned it and how far its runs got."""

    name: str
    settings: str  # "osd.objectStore=bluestore" or "the base"
    runs_done: int
    runs_planned: int
    note: str = ""  # why a run is missing (failed, interrupted)


@dataclass(frozen=True)
class StudyView:
    name: str
    variants: Sequence[VariantRow]  # the baseline first
    runs: Sequence[Run]  # merged repeats, one per variant with a finished run, same order
    bandwidth: Collection[str]
    latency_limit_ms: float | None = None
    allow_suspect: bool = False  # suspect steps count in the grid (`--allow-suspect`)

    def grid(self) -> list[Cell]:
        out: list[Cell] = []
        for info, results in self.runs:
            out += cells(info.name, results, self.bandwidth, self.latency_limit_ms,
                         self.allow_suspect)  # fmt: skip
        return out


GRID_HEADER = ["variant", "workload", "peak", "iodepth", "clat\\_ms", "p99\\_ms", "knee",
               "knee iodepth", "knee p99\\_ms", "per OSD core", "per GiB OSD mem",
               "suspect steps"]  # fmt: skip


def variants_table(view: StudyView) -> Table:
    rows = [
        [
            v.name + (" (baseline)" if i == 0 else ""),
            v.settings,
            f"{v.runs_done}/{v.runs_planned}",
            v.note or "",
        ]  # fmt: skip
        for i, v in enumerate(view.variants)
    ]
    return Table(["variant", "sets", "runs done", "note"], rows)


def grid_table(grid: Sequence[Cell]) -> Table:
    """One row per variant and workload; throughput in IOPS or MiB/s (the workload's)."""
    rows = []
    for c in grid:
        unit = " MiB/s" if c.bandwidth else ""
        p, k = c.peak, c.knee
        rows.append(
            [
                c.variant,
                c.workload,
                f"{fmt_figure(p.value)}{unit}" if p else "n/a (no trusted step)",
                str(p.iodepth) if p else "",
                _ms(p.clat_ms) if p else "",
                _ms(p.p99_ms) if p else "",
                f"{fmt_figure(k.value)}{unit}" if k else "n/a",
                str(k.iodepth) if k else "",
                _ms(k.p99_ms) if k else "",
                _num(c.per_core),
                _num(c.per_gib),
                str(c.suspect_steps),
            ]
        )
    return Table(list(GRID_HEADER), rows)


def verdict_summary(
    grid: Sequence[Cell], verdicts: Mapping[str, Sequence[Verdict]], baseline: str
) -> Table:
    """Per variant (not the baseline) and workload: its peak against the baseline's, and
    the verdict of the row at the variant's peak iodepth (change, interval, verdict)."""
    base = {c.workload: c for c in grid if c.variant == baseline}
    rows = []
    for c in grid:
        if c.variant == baseline:
            continue
        b = base.get(c.workload)
        change = (
            f"{(c.peak.value / b.peak.value - 1) * 100:+.1f}%"
            if c.peak and b and b.peak and b.peak.value > 0
            else "n/a"
        )
        row = _row_at(verdicts.get(c.variant, ()), c)
        rows.append(
            [
                c.variant,
                c.workload,
                change,
                str(c.peak.iodepth) if c.peak else "n/a",
                *(_verdict_cells(row) if row else ("n/a", "n/a", "no verdict at this iodepth")),
            ]
        )
    header = ["variant", "workload", "peak vs baseline", "at iodepth", "change there",
              "95% CI", "verdict"]  # fmt: skip
    return Table(header, rows)


def best_table(grid: Sequence[Cell], versus: Mapping[tuple[str, str], Verdict | None]) -> Table:
    """Per workload the variant with the highest trusted peak, the runner-up, the margin,
    and whether the margin is more than noise: the verdict of best vs runner-up at the
    best's peak iodepth (versus: (workload, best) -> that row)."""
    rows = []
    for b in best_per_workload(grid):
        row = versus.get((b.workload, b.variant))
        rows.append(
            [
                b.workload,
                b.variant,
                fmt_figure(b.value),
                b.runner_up or "none",
                "n/a" if math.isnan(b.margin_pct) else f"{b.margin_pct:+.1f}%",
                _margin_word(row) if b.runner_up else "only variant with a trusted peak",
            ]
        )
    return Table(["workload", "best", "peak", "runner-up", "margin", "beyond noise?"], rows)


def study_markdown(
    view: StudyView,
    verdicts: Mapping[str, Sequence[Verdict]],
    versus: Mapping[tuple[str, str], Verdict | None],
) -> str:
    grid = view.grid()
    baseline = view.variants[0].name if view.variants else ""
    allowed = f" {ALLOWED_NOTE}" if view.allow_suspect else ""
    parts = [
        f"# Study {view.name}\n",
        f"Baseline: **{baseline}**. " + GRID_NOTE + allowed + "\n",
        "## Variants\n",
        to_markdown(variants_table(view)),
        "## Grid\n",
        to_markdown(grid_table(grid)),
        KNEE_NOTE.format(rule=grid[0].knee_rule if grid else "") + "\n",
        "## Best variant per workload\n",
        to_markdown(best_table(grid, versus)),
        "## Against the baseline\n",
        to_markdown(verdict_summary(grid, verdicts, baseline)),
    ]
    return "\n".join(parts)


def study_sections(
    view: StudyView,
    verdicts: Mapping[str, Sequence[Verdict]],
    versus: Mapping[tuple[str, str], Verdict | None],
) -> list[tuple[str, str, str]]:
    """The study's own sections of the HTML page (anchor, title, body), before the
    comparison's runs, curves and verdict tables."""
    grid = view.grid()
    baseline = view.variants[0].name if view.variants else ""
    knee = KNEE_NOTE.format(rule=grid[0].knee_rule if grid else "")
    return [
        ("variants", "Variants",
         table_html(variants_table(view), css="text") + note(f"Baseline: **{baseline}**.")),
        ("grid", "Grid", table_html(grid_table(grid), cell_class=_na_class)
         + note(GRID_NOTE + (f" {ALLOWED_NOTE}" if view.allow_suspect else "")) + note(knee)),
        ("best", "Best variant per workload", table_html(best_table(grid, versus))),
        ("against-baseline", "Against the baseline",
         table_html(verdict_summary(grid, verdicts, baseline), cell_class=_worse_class)),
    ]  # fmt: skip


STUDY_SECTIONS = ("variants", "grid", "best", "against-baseline")


def best_versus(
    runs: Sequence[Run],
    bandwidth: Collection[str],
    view: StudyView,
    alpha: float,
    allow_suspect: bool,
) -> dict[tuple[str, str], Verdict | None]:
    """(workload, best variant) -> the verdict row of best vs runner-up at the best's
    peak iodepth: is the margin more than noise?"""
    by_name = {info.name: (info, results) for info, results in runs}
    out: dict[tuple[str, str], Verdict | None] = {}
    grid = view.grid()
    for b in best_per_workload(grid):
        if not b.runner_up:
            continue
        cell = next(c for c in grid if c.variant == b.variant and c.workload == b.workload)
        rows = run_verdicts(by_name[b.runner_up], by_name[b.variant], bandwidth, alpha,
                            allow_suspect)  # fmt: skip
        out[(b.workload, b.variant)] = _row_at(rows, cell)
    return out


def _na_class(cell: str) -> str:
    return "bad" if cell.startswith("n/a (no trusted") else ""


def _worse_class(cell: str) -> str:
    return "bad" if cell.startswith("worse") else ""


GRID_NOTE = (
    "Peak = the trusted step with the most IOPS (MiB/s for sequential workloads), repeats "
    "averaged; a suspect step never decides a figure. Per OSD core = peak / (OSD CPU % / "
    "100) at the peak; per GiB = peak / OSD memory (GiB) there."
)
KNEE_NOTE = "Knee: {rule}."
ALLOWED_NOTE = (
    "Here suspect steps count like any other (--allow-suspect): the last column says how "
    "many of a figure's steps are."
)


def row_at(rows: Sequence[Verdict], workload: str, iodepth: int) -> Verdict | None:
    return next((r for r in rows if r.workload == workload and r.iodepth == iodepth), None)


def _row_at(rows: Sequence[Verdict], c: Cell) -> Verdict | None:
    return row_at(rows, c.workload, c.peak.iodepth) if c.peak else None


def _verdict_cells(row: Verdict) -> tuple[str, str, str]:
    cells = row.cells()  # HEADER order: change is 5, CI 6, verdict 11
    verdict = cells[11] + (f" ({row.why})" if row.why else "")
    return cells[5], cells[6], verdict


def _margin_word(row: Verdict | None) -> str:
    if row is None:
        return "untested (no common iodepth)"
    if row.significant():
        return f"yes: {row.verdict} (p {row.cells()[10]})"
    if row.tested:
        return f"no: within noise (p {row.cells()[10]})"
    return f"untested: {row.why or row.test}"


def _ms(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.2f}"


def _num(v: float) -> str:
    return "n/a" if math.isnan(v) else fmt_figure(v)
