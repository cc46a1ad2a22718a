"""Reports written from a results directory alone (see crimsonbench.results.store)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from crimsonbench.reports.compare import Run, comparison_markdown, labels, overlay_figures
from crimsonbench.reports.definitions import definitions_markdown
from crimsonbench.reports.html import (
    RunView,
    VerdictView,
    comparison_html,
    run_report_html,
    verdicts_html,
)
from crimsonbench.reports.notes import workload_notes
from crimsonbench.reports.plots import cpu_per_step, png, response_curve
from crimsonbench.reports.study import StudyView, best_versus, study_markdown, study_sections
from crimsonbench.reports.tables import markdown_table, to_csv, to_json, workload_tables
from crimsonbench.reports.verdicts import run_verdicts, verdict_markdown
from crimsonbench.results.gate import GateFailure, gate, regressions
from crimsonbench.results.rules import average_repeats, by_workload, is_bandwidth_workload
from crimsonbench.results.store import (
    CorruptResults,
    ResultStore,
    UnsafePath,
    safe_name,
    write_atomic,
)
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import suspect_lines
from crimsonbench.spec.models import SweepSpec, WorkloadSpec

log = logging.getLogger(__name__)
STORED_SECTION = "stored-baseline"  # the comparison's section against a stored baseline


def write_report(store_dir: Path) -> list[Path]:
    """summary.md, results.csv, results.json, PNGs and report.html (the same in one
    self-contained page, reports.html) in <store_dir>/report/.

    The run's spec, when the executor saved it as run.json's extra["spec"], tells which
    workloads are read as bandwidth and the early-exit, knee and latency-target settings.
    Everything is read and rendered first, and report/ checked: an unusable input file
    (store.CorruptResults, listing them all) or a linked report/ (store.UnsafePath)
    stops it before the first file is written.
    """
    store = ResultStore(store_dir)
    info, extra = _run_info(store)
    scan = store.scan_steps()
    if scan.problems:
        raise CorruptResults(store.root, scan.problems)
    results = [r for _, r in sorted(scan.results.items())]
    sweep = _sweep(extra)
    bw = _bandwidth_workloads(extra, {r.workload for r in results})
    files: list[tuple[str, str | bytes]] = [
        ("results.csv", to_csv(results)),
        ("results.json", to_json(results)),
    ]
    parts = [_header(info, results, scan.unfinished)]
    for workload, rows in by_workload(results).items():
        is_bw = workload in bw
        kind = "bw" if is_bw else "iops"
        curve = response_curve([(info.label, rows)], workload, is_bw)
        cpu = cpu_per_step([(info.label, rows)], workload)
        files.append((safe_name(f"{workload}_{kind}_vs_lat.png", "report file"), png(curve)))
        files.append((safe_name(f"{workload}_cpu.png", "report file"), png(cpu)))
        parts.append(_workload_section(workload, rows, is_bw, sweep))
    parts.append("## Columns\n\n" + definitions_markdown())
    files.insert(0, ("summary.md", "\n".join(parts)))
    view = RunView(info, results, bw, extra, store.read_plan(), sweep, scan.unfinished)
    files.append(("report.html", run_report_html(view)))
    store.check_report_writable(name for name, _ in files)
    written = [store.write_report_file(name, data) for name, data in files]
    log.info("report of %d steps in %s", len(results), store.report_dir())
    return written


def final_table(store_dir: Path, fmt: str) -> str:
    """The run's table for stdout: markdown (one table per workload, repeats averaged, in
    the published layout), csv or json (every step, every figure)."""
    store = ResultStore(store_dir)
    results = store.read_results()
    if fmt == "csv":
        return to_csv(results)
    if fmt == "json":
        return to_json(results)
    _, extra = _run_info(store)
    bw = _bandwidth_workloads(extra, {r.workload for r in results})
    parts = []
    for workload, table in workload_tables(results, bw, percentiles=True).items():
        parts.append(f"## {workload}\n\n{table}")
    suspect = suspect_lines(results)
    if suspect:  # the reasons behind every SUSPECT row above, with their figures
        parts.append(f"## suspect steps ({len(suspect)})\n\n" + "\n".join(suspect) + "\n")
    return "\n".join(parts) or "no finished steps\n"


@dataclass(frozen=True)
class Comparison:
    written: list[Path]
    verdicts: str  # markdown: each run against the first
    regressions: int  # rows worse beyond the threshold, significantly
    # what fails the gate (regressions, missing steps or figures, untested rows), per NEW
    failures: list[tuple[str, GateFailure]] = field(default_factory=list)
    allowed: list[tuple[str, GateFailure]] = field(default_factory=list)  # --allow-untested


def read_run(path: Path) -> Run:
    """One results directory for a comparison: its RunInfo and every step, checked
    (CorruptResults lists every unusable file; UnsafePath names a link)."""
    store = ResultStore(path)
    info, _ = _run_info(store)
    return info, store.read_results()


def read_compared(path: Path) -> tuple[Run, set[str]]:
    """read_run, and the run's workloads read as MiB/s (from its saved spec)."""
    store = ResultStore(path)
    info, extra = _run_info(store)
    results = store.read_results()
    return (info, results), _bandwidth_workloads(extra, {r.workload for r in results})


def write_comparison(
    dirs: Sequence[Path],
    out: Path,
    threshold_pct: float = 5.0,
    alpha: float = 0.05,
    allow_untested: bool = False,
    allow_suspect: bool = False,
) -> Comparison:
    """comparison.md (peaks side by side, regression verdicts, the gate), overlaid
    PNGs and comparison.html (all of it in one page) of 2+ results directories, the
    first as baseline. Every input is read and every
    output rendered before the first file is written to OUT; file names come from
    workload names the store has checked, and each lands directly in OUT."""
    runs: list[Run] = []
    bw: set[str] = set()
    for d in dirs:
        run, run_bw = read_compared(d)
        runs.append(run)
        bw |= run_bw
    return write_compared(runs, bw, out, threshold_pct, alpha, allow_untested, allow_suspect)


def write_compared(
    runs: Sequence[Run],
    bw: set[str],
    out: Path,
    threshold_pct: float,
    alpha: float,
    allow_untested: bool,
    allow_suspect: bool,
    study: StudyView | None = None,
    stored: Run | None = None,
) -> Comparison:
    """write_comparison of runs already read; a study's sections (reports.study) first
    in comparison.md and comparison.html when `study` is given; with `stored` (a stored
    baseline: an earlier run), every run judged against it too, and gated alike."""
    names = labels(runs)
    gating = _Gating(bw, threshold_pct, alpha, allow_untested, allow_suspect)
    judged = gating.judge(runs[0], names[0], list(zip(runs[1:], names[1:], strict=True)))
    views = judged.views
    text = comparison_markdown(runs, bw) + "\n## Verdicts\n\n" + "\n".join(judged.markdown)
    leading: list[tuple[str, str, str]] = []
    if study is not None:
        by_variant = {info.name: v.rows for (info, _), v in zip(runs[1:], views, strict=True)}
        versus = best_versus(runs, bw, study, alpha, allow_suspect)
        text = study_markdown(study, by_variant, versus) + "\n" + text
        leading = study_sections(study, by_variant, versus)
    if stored is not None:
        label = f"the stored baseline {stored[0].label}"
        against = gating.judge(stored, label, list(zip(runs, names, strict=True)),
                               " vs the stored baseline")  # fmt: skip
        text += "\n## Against the stored baseline\n\n" + "\n".join(against.markdown)
        judged.add(against)
        leading.append((STORED_SECTION, "Against the stored baseline",
                        verdicts_html(label, against.views, threshold_pct, alpha)))  # fmt: skip
    files: list[tuple[str, bytes | str]] = []
    sections = []
    for workload, (curve, cpu) in overlay_figures(runs, bw).items():
        kind = "bw" if workload in bw else "iops"
        curve_name = safe_name(f"{workload}_{kind}_vs_lat.png", "comparison file")
        cpu_name = safe_name(f"{workload}_cpu.png", "comparison file")
        files += [(curve_name, png(curve)), (cpu_name, png(cpu))]
        sections.append(f"![{workload}]({curve_name})\n![{workload} CPU]({cpu_name})\n")
    text += "\n## Plots\n\n" + "\n".join(sections)
    files.insert(0, ("comparison.md", text))
    title = f"Study {study.name}" if study is not None else ""
    files.append(("comparison.html", comparison_html(runs, bw, views, threshold_pct, alpha,
                                                     title=title, leading=leading)))  # fmt: skip
    # a comparison is not a results directory: its files go straight into OUT
    targets = [_out_file(out, name) for name, _ in files]
    out.mkdir(parents=True, exist_ok=True)
    written = [write_atomic(t, data) for t, (_, data) in zip(targets, files, strict=True)]
    return Comparison(written, "\n".join(judged.markdown), judged.bad, judged.failures,
                      judged.allowed)  # fmt: skip


@dataclass
class _Judged:
    """Runs judged against one base: each verdict table, what the gate fails and lets by."""

    markdown: list[str] = field(default_factory=list)
    views: list[VerdictView] = field(default_factory=list)
    bad: int = 0  # regressions
    failures: list[tuple[str, GateFailure]] = field(default_factory=list)
    allowed: list[tuple[str, GateFailure]] = field(default_factory=list)

    def add(self, other: _Judged) -> None:
        self.markdown += other.markdown
        self.bad += other.bad
        self.failures += other.failures
        self.allowed += other.allowed


@dataclass(frozen=True)
class _Gating:
    bw: set[str]
    threshold_pct: float
    alpha: float
    allow_untested: bool
    allow_suspect: bool

    def judge(self, base: Run, base_label: str, runs: Sequence[tuple[Run, str]],
              suffix: str = "") -> _Judged:  # fmt: skip
        out = _Judged()
        for new, name in runs:
            rows = run_verdicts(base, new, self.bw, self.alpha, self.allow_suspect)
            out.bad += len(regressions(rows, self.threshold_pct, self.alpha))
            fail, ok = gate(rows, self.threshold_pct, self.alpha, self.allow_untested)
            out.failures += [(name + suffix, f) for f in fail]
            out.allowed += [(name + suffix, f) for f in ok]
            out.markdown.append(verdict_markdown(base_label, name, rows, self.threshold_pct,
                                                 self.alpha, fail, ok))  # fmt: skip
            out.views.append(VerdictView(name, rows, fail, ok))
        return out


def _out_file(out: Path, name: str) -> Path:
    """OUT/name, refused unless it resolves to a file directly in OUT (no link there)."""
    path = out / safe_name(name, "comparison file")
    if path.is_symlink():
        raise UnsafePath(
            f"{path} is a symbolic link (to {os.readlink(path)}); a comparison is never "
            "written through one: remove it or pick another --out"
        )
    if path.exists() and not path.is_file():
        raise UnsafePath(f"{path} exists and is not a file; remove it or pick another --out")
    real_out = os.path.realpath(out)
    if os.path.dirname(os.path.realpath(path)) != real_out:
        raise UnsafePath(f"{path} would be written outside {real_out}")
    return path


def _run_info(store: ResultStore) -> tuple[RunInfo, dict[str, Any]]:
    try:
        return store.read_run()
    except FileNotFoundError:
        # a run that died before writing run.json still has results worth reading
        log.warning("%s has no run.json; labelling the run by its directory", store.root)
        name = store.root.resolve().name
        return RunInfo(name, "unknown", "unknown", 0, 0, "unknown", "unknown"), {}


def _spec(extra: dict[str, Any]) -> dict[str, Any]:
    spec = extra.get("spec")
    return spec if isinstance(spec, dict) else {}


def _workload_entries(extra: dict[str, Any]) -> list[Any]:
    raw = _spec(extra).get("workloads")
    if raw is None:
        return []
    if not isinstance(raw, list):
        log.warning("run.json spec.workloads is not a list; workloads are read by name")
        return []
    return raw


def _sweep(extra: dict[str, Any]) -> SweepSpec | None:
    raw = _spec(extra).get("sweep")
    if raw is None:
        return None
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        log.warning("run.json spec.sweep is unreadable, skipping its rules: %s", exc)
        return None


def _bandwidth_workloads(extra: dict[str, Any], names: set[str]) -> set[str]:
    """Workloads read as MiB/s: from the saved spec where possible, else by name."""
    known: dict[str, bool] = {}
    for raw in _workload_entries(extra):
        try:
            w = WorkloadSpec.model_validate(raw)
        except ValidationError as exc:
            log.warning("run.json spec workload %r is unreadable: %s", raw, exc)
            continue
        known[w.key] = w.reports_bandwidth
    return {n for n in names if known.get(n, is_bandwidth_workload(n))}


def _header(info: RunInfo, results: Sequence[StepResult], unfinished: Sequence[str]) -> str:
    lines = [
        f"# {info.label}\n",
        f"- flavor: {info.flavor}, object store: {info.object_store}, OSDs: {info.osds}, "
        f"reactors per OSD: {info.reactors}",
        f"- CPU policy: {info.policy}, hyper-threads: {info.hyper_threads}",
        f"- Ceph: {info.ceph_version or 'unknown'}, host: {info.host or 'unknown'}, "
        f"started: {info.started or 'unknown'}",
        f"- completed steps: {len(results)}",
    ]
    if unfinished:
        lines.append(
            "- unfinished steps (a directory without result.json, not in the tables): "
            + ", ".join(unfinished)
        )
    lines += [
        "",
        "Rows with repeats show the mean of the repeats (errors summed). What each column "
        "is, and where the published tables' tool computes it differently: see Columns at "
        "the end (usr/sys\\_cpu are summed over fio jobs, as published; bw\\_pub is the "
        "published tables' bw). Full precision: results.csv.",
        "",
    ]
    return "\n".join(lines)


def _workload_section(
    workload: str, rows: Sequence[StepResult], bw: bool, sweep: SweepSpec | None
) -> str:
    notes = workload_notes(rows, bw, sweep)
    notes += suspect_lines(sorted(rows, key=lambda r: (r.iodepth, r.repeat)))
    kind = "bw" if bw else "iops"
    return "\n".join(
        [
            f"## {workload}\n",
            *notes,
            "",
            markdown_table(average_repeats(rows), bandwidth=bw, percentiles=True),
            f"![{workload} response curve]({workload}_{kind}_vs_lat.png)",
            f"![{workload} CPU]({workload}_cpu.png)\n",
        ]
    )
