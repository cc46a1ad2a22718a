"""A study's comparison written from its runs' results directories: each variant's
completed runs merged (their repeats), the baseline variant first, then `compare`'s
files with the study's sections on top (reports.study)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crimsonbench.reports.report import Comparison, read_compared, write_compared
from crimsonbench.reports.study import StudyView, VariantRow
from crimsonbench.results.study import Run, merge_repeats


@dataclass(frozen=True)
class VariantRuns:
    row: VariantRow
    dirs: Sequence[Path]  # its completed runs' results directories


class NothingToCompare(Exception):
    """Fewer than two variants (the baseline among them) have a finished run."""


def write_study_comparison(
    name: str,
    variants: Sequence[VariantRuns],
    out: Path,
    latency_limit_ms: float | None = None,
    threshold_pct: float = 5.0,
    alpha: float = 0.05,
    allow_untested: bool = False,
    allow_suspect: bool = False,
    stored_baseline: Path | None = None,
) -> Comparison:
    """comparison.md, comparison.html and the overlaid PNGs of the study in OUT. The
    first variant is the baseline; a variant without a finished run is listed (with
    why) but not compared. stored_baseline: a results directory (an earlier run, e.g.
    last release's) every variant is also judged against, and gated on."""
    if not variants or not variants[0].dirs:
        base = variants[0].row.name if variants else "none"
        raise NothingToCompare(f"the baseline variant {base} has no finished run")
    runs: list[Run] = []
    bw: set[str] = set()
    for v in variants:
        if not v.dirs:
            continue
        read = [read_compared(d) for d in v.dirs]
        for _, run_bw in read:
            bw |= run_bw
        runs.append(merge_repeats(v.row.name, [run for run, _ in read]))
    if len(runs) < 2:
        raise NothingToCompare("only the baseline variant has a finished run")
    stored: Run | None = None
    if stored_baseline is not None:
        stored, stored_bw = read_compared(stored_baseline)
        bw |= stored_bw
    view = StudyView(name, [v.row for v in variants], runs, bw, latency_limit_ms,
                     allow_suspect)  # fmt: skip
    return write_compared(runs, bw, out, threshold_pct, alpha, allow_untested, allow_suspect,
                          study=view, stored=stored)  # fmt: skip
